package command_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// TestHandle_ReplicaCutOffDoesNotApplyWhatItHeld: replica A holds a command when its link to
// NATS goes down (without a reset, as a cable pulled); replica B gets the command after the ack
// wait, applies it, and applies the entity's next command. When A's link comes back and A
// carries on with the command it held, nothing changes: the entity has exactly one outcome per
// command and its record is the one B wrote.
//   - "lease": A's handler runs as the runtime gives it (its lease is gone);
//   - "record": A's handler runs as if it still held the command (no lease at all): the
//     record, written for a later command, makes the late copy a no-op.
func TestHandle_ReplicaCutOffDoesNotApplyWhatItHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noLease bool
	}{{"lease", false}, {"record", true}} {
		t.Run(tc.name, func(t *testing.T) {
			env, link := linkedEnv(t)
			key := domain.MustKey(cluster)

			held, gate := make(chan struct{}), make(chan struct{})
			holding := make(chan error, 1)
			var once sync.Once
			startReplicaVia(t, link.URL(), func(next function.Handler) function.Handler {
				return func(ctx context.Context, m function.Message) error {
					if m.Header.Get(domain.HeaderMsgID) != "c-1" {
						return next(ctx, m)
					}
					once.Do(func() { close(held) })
					<-gate // stalled, whatever happens meanwhile
					holding <- function.Holding(ctx)
					if tc.noLease {
						ctx = context.Background()
					}
					return next(ctx, m)
				}
			})
			send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending})
			waitFor(t, held, "replica A to hold c-1")

			startReplicas(t, env, 1, command.Config{})
			link.Cut()
			if ev := testenv.WaitEvents(t, env.JS, key, 1, 40*time.Second)[0]; ev.CommandID != "c-1" || ev.Outcome != domain.OutcomeApplied {
				t.Fatalf("first outcome %+v, want c-1 applied by the replica that took over", ev)
			}
			send(t, env.JS, domain.Command{ID: "c-2", ResourceID: cluster, Task: domain.TaskNone})
			events(t, env.JS, key, 2)

			link.Heal()
			close(gate)
			// A now carries on with c-1 (None -> Pending, if it were applied again).
			time.Sleep(3 * time.Second)
			if err := <-holding; !tc.noLease && !errors.Is(err, function.ErrLeaseLost) {
				t.Errorf("replica A after the cut: Holding = %v, want ErrLeaseLost", err)
			}
			evs := readEvents(t, env.JS, domain.EventSubject(key))
			if len(evs) != 2 || evs[0].CommandID != "c-1" || evs[1].CommandID != "c-2" || evs[1].Outcome != domain.OutcomeApplied {
				t.Fatalf("outcomes %+v, want c-1 and c-2 applied once each", evs)
			}
			if rec, _ := record(t, env, key); rec.State != domain.StateNone || rec.LastCommandID != "c-2" {
				t.Fatalf("record %+v, want None written by c-2", rec)
			}
		})
	}
}

// startReplicaVia runs one replica connected to NATS at url (a Link) until the test ends.
func startReplicaVia(t *testing.T, url string, wrap func(function.Handler) function.Handler) {
	t.Helper()
	startReplicaWith(t, url, func(*natsconn.Conn) command.Config { return command.Config{} }, wrap)
}

// startReplicaWith runs one replica connected to NATS at url, configured by cfg on its own
// connection, until the test ends; it returns the connection.
func startReplicaWith(t *testing.T, url string, cfg func(*natsconn.Conn) command.Config, wrap func(function.Handler) function.Handler) *natsconn.Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := natsconn.Connect(ctx, natsconn.Options{Servers: url, Name: "replica-a"})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := command.New(ctx, conn.JS, cfg(conn))
	if err != nil {
		t.Fatal(err)
	}
	rc := fn.RuntimeConfig()
	rc.Handler = wrap(rc.Handler)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := function.Run(ctx, conn.JS, rc); err != nil {
			t.Errorf("replica A: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; conn.Close() })
	return conn
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestHandle_ReconnectedReplicaKeepsEntityOrder: a replica whose connection drops while it
// holds an entity's command gives the command up; when it is back, a newer command of the same
// entity must wait until the given-up one has come back and run, not overtake it.
func TestHandle_ReconnectedReplicaKeepsEntityOrder(t *testing.T) {
	env, link := linkedEnv(t)
	key := domain.MustKey(cluster)
	held, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	startReplicaVia(t, link.URL(), func(next function.Handler) function.Handler {
		return func(ctx context.Context, m function.Message) error {
			if m.Header.Get(domain.HeaderMsgID) == "c-1" && m.Delivered == 1 {
				once.Do(func() { close(held) })
				<-gate
			}
			return next(ctx, m)
		}
	})
	send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending})
	waitFor(t, held, "the replica to hold c-1")
	// Long enough for the client to give the connection up (pings), shorter than the pin's TTL.
	link.Cut()
	time.Sleep(3500 * time.Millisecond)
	link.Heal()
	// Back, and past a keep-alive round that gives c-1 up; c-2 comes while c-1 is away.
	time.Sleep(1500 * time.Millisecond)
	send(t, env.JS, domain.Command{ID: "c-2", ResourceID: cluster, Task: domain.TaskEverything})
	close(gate)
	evs := events(t, env.JS, key, 2)
	if len(evs) != 2 || evs[0].CommandID != "c-1" || evs[1].CommandID != "c-2" ||
		evs[0].Outcome != domain.OutcomeApplied || evs[1].Outcome != domain.OutcomeApplied || evs[1].From != domain.StatePending {
		t.Fatalf("outcomes %+v, want c-1 then c-2 applied (Pending -> Planned)", evs)
	}
}

// linkedEnv is a server listening on loopback and a Link in front of it, for a replica whose
// network the test cuts.
func linkedEnv(t *testing.T) (*testenv.Env, *testenv.Link) {
	t.Helper()
	env := testenv.StartListening(t)
	u, err := url.Parse(env.Server.URL())
	if err != nil {
		t.Fatal(err)
	}
	return env, testenv.StartLink(t, u.Host)
}

// TestHandle_RefusalOnRedeliveryFencesAHeldCommit is the interleaving the partition suite found
// once in 3,500 commands, made to happen: replica A decides to apply c-1 and is held with its
// write in flight (sent, so a lost lease cannot recall it) while its link is cut; replica B,
// configured to refuse c-1 (a minimum notice A does not have, as during a rolling change, or a
// stale read), gets the redelivery and refuses it. Then A's write reaches the bucket. The
// refusal's fence must make that write fail: c-1 is refused in its outcome and absent from the
// record, and the entity's next command applies on the record as the outcomes say it is.
func TestHandle_RefusalOnRedeliveryFencesAHeldCommit(t *testing.T) {
	env, link := linkedEnv(t)
	key := domain.MustKey(cluster)
	now := time.Now().UTC()
	far := &domain.Window{Start: now.Add(72 * time.Hour), End: now.Add(74 * time.Hour)}
	soon := &domain.Window{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)}

	held, release := make(chan struct{}), make(chan struct{})
	lateWrite := make(chan error, 1)
	var once sync.Once
	startReplicaWith(t, link.URL(), func(conn *natsconn.Conn) command.Config {
		st, err := store.Open(context.Background(), conn.JS)
		if err != nil {
			t.Fatal(err)
		}
		return command.Config{Records: &heldWrite{Records: st, id: "c-1", held: held, release: release, done: lateWrite, once: &once}}
	}, func(next function.Handler) function.Handler { return next })

	send(t, env.JS, domain.Command{ID: "c-0", ResourceID: cluster, Task: domain.TaskPending, Window: far})
	events(t, env.JS, key, 1)
	send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending, Window: soon})
	waitFor(t, held, "replica A to hold its write of c-1")

	startReplicas(t, env, 1, command.Config{MinNotice: 24 * time.Hour})
	link.Cut()
	evs := events(t, env.JS, key, 2)
	if evs[1].CommandID != "c-1" || evs[1].Outcome != domain.OutcomeRejected {
		t.Fatalf("outcome of c-1 %+v, want rejected by the replica that took it over", evs[1])
	}

	link.Heal()
	close(release)
	select {
	case err := <-lateWrite:
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("replica A's late write of c-1: %v, want a conflict with the refusal's fence", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("replica A's late write of c-1 never returned")
	}
	rec, _ := record(t, env, key)
	if rec.LastCommandID != "c-0" || rec.Window == nil || !rec.Window.Start.Equal(far.Start) || rec.Seen("c-1") {
		t.Fatalf("record %+v (window %+v), want c-0's Pending, c-1 not written", rec, rec.Window)
	}

	send(t, env.JS, domain.Command{ID: "c-2", ResourceID: cluster, Task: domain.TaskEverything})
	evs = events(t, env.JS, key, 3)
	want := []struct {
		id      string
		outcome domain.Outcome
	}{{"c-0", domain.OutcomeApplied}, {"c-1", domain.OutcomeRejected}, {"c-2", domain.OutcomeApplied}}
	if len(evs) != len(want) {
		t.Fatalf("outcomes %+v, want one each of c-0, c-1, c-2", evs)
	}
	for i, w := range want {
		if evs[i].CommandID != w.id || evs[i].Outcome != w.outcome {
			t.Fatalf("outcome %d: %s %s, want %s %s", i, evs[i].CommandID, evs[i].Outcome, w.id, w.outcome)
		}
	}
	if rec, _ := record(t, env, key); rec.LastCommandID != "c-2" || rec.State != domain.StatePlanned || !rec.Window.Start.Equal(far.Start) {
		t.Fatalf("record %+v, want c-2 applied on c-0's announcement (Planned, its window)", rec)
	}
}

// heldWrite holds the write of command id until release, as a write sent just before the
// replica's link was cut: it then goes through whatever the replica's context says, and its
// result is sent on done.
type heldWrite struct {
	command.Records
	id            string
	held, release chan struct{}
	done          chan error
	once          *sync.Once
}

func (h *heldWrite) Put(ctx context.Context, key string, prev store.Versioned, next domain.Record) (uint64, error) {
	if next.LastCommandID != h.id {
		return h.Records.Put(ctx, key, prev, next)
	}
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return h.Records.Put(ctx, key, prev, next)
	}
	close(h.held)
	<-h.release
	rev, err := h.Records.Put(context.WithoutCancel(ctx), key, prev, next)
	h.done <- err
	return rev, err
}
