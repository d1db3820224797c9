package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

const id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

var quiet = testenv.Quiet()

func setup(t *testing.T, withFunction bool) *client.Client {
	t.Helper()
	env := testenv.Start(t)
	if withFunction {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- command.Run(ctx, env.JS, command.Config{Log: quiet}) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("command function: %v", err)
			}
		})
	}
	c, err := client.New(testenv.Connect(t, env.Server), quiet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cmd(cid string, task domain.Task) domain.Command {
	return domain.Command{ID: cid, ResourceID: id, Task: task, Actor: "test"}
}

func TestSendHistoryWatch(t *testing.T) {
	c := setup(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	w, err := c.Watch(ctx, client.WatchOptions{ResourceID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	res, err := c.Send(ctx, cmd("c-1", domain.TaskPending))
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Outcome != domain.OutcomeApplied || res.Event.To != domain.StatePending || res.Entity.Record.State != domain.StatePending || !res.Entity.Exists() {
		t.Errorf("pending: %+v", res)
	}

	res, err = c.Send(ctx, cmd("c-2", domain.TaskUpdateSucceeded))
	var oe *client.OutcomeError
	if !errors.As(err, &oe) || oe.Event.Code != domain.CodeRequestNotAllowed || res == nil || res.Entity.Record.State != domain.StatePending {
		t.Errorf("succeeded with nothing updating: %+v, %v", res, err)
	}

	res, err = c.Send(ctx, cmd("c-1", domain.TaskPending))
	if err != nil || !res.Republished || res.Event.CommandID != "c-1" || res.Event.Outcome != domain.OutcomeApplied {
		t.Errorf("same id again: %+v, %v", res, err)
	}

	if _, err := c.Send(ctx, domain.Command{ID: "bad id", ResourceID: id, Task: domain.TaskNone}); !errors.Is(err, client.ErrInvalidCommand) {
		t.Errorf("invalid id: %v", err)
	}

	evs, err := c.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].CommandID != "c-1" || evs[1].CommandID != "c-2" {
		t.Errorf("history = %+v", evs)
	}
	for i, want := range []string{"c-1", "c-2"} {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.CommandID != want {
			t.Errorf("watched event %d = %s, want %s", i, ev.CommandID, want)
		}
	}

	ent, err := c.Get(ctx, "/never/seen")
	if err != nil || ent.Exists() || ent.Record.State != domain.StateNone || ent.Record.ResourceID != "/never/seen" {
		t.Errorf("unknown entity: %+v, %v", ent, err)
	}
	n := 0
	if err := c.Scan(ctx, func(client.Entity, error) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("scan: %d records, %v", n, err)
	}
}

func TestSendWithoutFunctionTimesOut(t *testing.T) {
	c := setup(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := c.Send(ctx, cmd("c-1", domain.TaskPending))
	if !errors.Is(err, client.ErrNoOutcome) || res == nil || res.Seq != 1 {
		t.Errorf("Send = %+v, %v; want ErrNoOutcome after storing the command", res, err)
	}
}

func TestNormalizeServers(t *testing.T) {
	tests := map[string]string{
		"":                            client.DefaultServer,
		" , ":                         client.DefaultServer,
		"127.0.0.1:4222":              "nats://127.0.0.1:4222",
		"nats://a:1, b:2 ,tls://c:3 ": "nats://a:1,nats://b:2,tls://c:3",
	}
	for in, want := range tests {
		if got := client.NormalizeServers(in); got != want {
			t.Errorf("NormalizeServers(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewCommandIDIsValidAndFresh(t *testing.T) {
	a, b := client.NewCommandID("maintctl"), client.NewCommandID("maintctl")
	if a == b || !domain.ValidID(a) || !domain.ValidID(b) {
		t.Errorf("ids %q %q", a, b)
	}
}

// TestSendDeniedFailsAtOnce: on a server with the users of infra/nats, a reader's command is
// refused at once with a permission error, where an admin's goes through.
func TestSendDeniedFailsAtOnce(t *testing.T) {
	op, admin, reader := natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t)
	users, err := natsconf.NkeyUsers([]natsconf.User{
		{Name: "operator", Role: natsconf.RoleOperator, Nkey: op.Public},
		{Name: "admin", Role: natsconf.RoleAdmin, Nkey: admin.Public},
		{Name: "reader", Role: natsconf.RoleReader, Nkey: reader.Public},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Server(t, embedded.Config{StoreDir: t.TempDir(), Nkeys: users})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	connect := func(u natstest.User, r natsconf.Role) *client.Client {
		t.Helper()
		conn, err := natsconn.Connect(ctx, natsconn.Options{
			Servers: s.InProcessURL(), NkeyFile: u.SeedFile, InboxPrefix: r.InboxPrefix(), Logger: quiet,
			Extra: []nats.Option{nats.InProcessServer(s.Server)},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := client.FromConn(conn, client.Options{Logger: quiet})
		t.Cleanup(c.Close)
		return c
	}
	if _, err := provision.Run(ctx, connect(op, natsconf.RoleOperator).JS, provision.Config{Tick: time.Minute, Partitions: 2}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	ac, rc := connect(admin, natsconf.RoleAdmin), connect(reader, natsconf.RoleReader)

	for name, send := range map[string]func(context.Context) error{
		"Send": func(ctx context.Context) error { _, err := rc.Send(ctx, cmd("r-1", domain.TaskPending)); return err },
		"PublishOnly": func(ctx context.Context) error {
			_, _, err := rc.PublishOnly(ctx, cmd("r-2", domain.TaskPending))
			return err
		},
	} {
		start := time.Now()
		err := send(ctx)
		var pe *natsconn.PermissionError
		if !errors.Is(err, natsconn.ErrPermissionDenied) || !errors.As(err, &pe) || pe.Op != "publish" || pe.Subject != domain.CommandSubject(domain.MustKey(id)) {
			t.Errorf("reader %s: %v, want a permission error on the command subject", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("reader %s took %s to fail", name, d)
		}
	}
	if seq, _, err := ac.PublishOnly(ctx, cmd("a-1", domain.TaskPending)); err != nil || seq != 1 {
		t.Errorf("admin PublishOnly: sequence %d, %v", seq, err)
	}
}

func TestSend_IDUsedForAnotherEntityFailsAtOnce(t *testing.T) {
	c := setup(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Send(ctx, cmd("shared-id", domain.TaskPending)); err != nil {
		t.Fatal(err)
	}
	other := cmd("shared-id", domain.TaskPending)
	other.ResourceID = id + "-other"
	// Waiting for an outcome that can never come would end in ErrNoOutcome at the deadline.
	if _, err := c.Send(ctx, other); !errors.Is(err, client.ErrIDInUse) {
		t.Fatalf("err = %v, want ErrIDInUse", err)
	}
}
