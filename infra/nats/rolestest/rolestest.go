// Package rolestest is the proof that the NATS users of infra/nats allow what each role needs
// and deny the rest, with real connections to a real server or cluster: every allowed action of
// each role works with no permission violation, and every denied one fails at once. The
// one-node test (infra/nats) and the secured `maintctl up --nodes 3` test (infra/maintctl) run
// the same table.
package rolestest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/client"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/shared/policy"
	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// ResourceID is the entity the table changes.
const ResourceID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"

// fast is "at once": a denied call must fail in one round trip, far from any timeout.
const fast = 2 * time.Second

// LogBuffer collects a connection's log, to check that the allowed paths hit no violation.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Party is one user of the deployment, connected (Conn), named as in natsconf.DefaultUsers.
// Log receives the connection's log (natsconn.Options.Logger), to check that the allowed
// paths hit no permission violation.
type Party struct {
	Name string
	Role natsconf.Role
	*natsconn.Conn
	Log *LogBuffer
}

// Options say what the stack under test runs.
type Options struct {
	// Provision is the configuration the operator provisions with; on a stack already
	// provisioned, the one it was provisioned with (a second run must change nothing).
	Provision provision.Config
	// RunFunctions runs the command, emitter and notices functions as the parties "command"
	// and "emitter" (notices under the function role too); false when the stack runs its own
	// (maintctl up).
	RunFunctions bool
}

var quiet = testenv.Quiet()

// NewUsers gives the users of natsconf.DefaultUsers fresh keys: the users (public keys) for
// the server, and each one's seed file by name.
func NewUsers(t testing.TB) (users []natsconf.User, seeds map[string]string) {
	t.Helper()
	seeds = map[string]string{}
	for _, u := range natsconf.DefaultUsers() {
		nu := natstest.NewUser(t)
		users = append(users, natsconf.User{Name: u.Name, Role: u.Role, Nkey: nu.Public})
		seeds[u.Name] = nu.SeedFile
	}
	return users, seeds
}

// Connect connects every user as a party, with base (the servers, TLS files, in-process
// option) plus the user's seed file and its role's inbox prefix; the connections close when
// the test ends.
func Connect(t testing.TB, users []natsconf.User, seeds map[string]string, base natsconn.Options) map[string]*Party {
	t.Helper()
	parties := map[string]*Party{}
	for _, u := range users {
		p := &Party{Name: u.Name, Role: u.Role, Log: &LogBuffer{}}
		o := base
		o.Name, o.NkeyFile, o.InboxPrefix = u.Name, seeds[u.Name], u.Role.InboxPrefix()
		o.Logger = slog.New(slog.NewTextHandler(p.Log, nil))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := natsconn.Connect(ctx, o)
		cancel()
		if err != nil {
			t.Fatalf("connect %s: %v", u.Name, err)
		}
		p.Conn = conn
		t.Cleanup(p.Close)
		parties[u.Name] = p
	}
	return parties
}

func newClient(t *testing.T, p *Party) *client.Client {
	t.Helper()
	c, err := client.New(p.NC, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cmd(id string, task domain.Task) domain.Command {
	return domain.Command{ID: id, ResourceID: ResourceID, Task: task, Actor: "test"}
}

// Check runs the table against parties, the users of natsconf.DefaultUsers connected to the
// stack: each role's allowed actions, then the denied ones (each tried by every role that must
// not do it), then that the denied ones changed nothing.
func Check(t *testing.T, p map[string]*Party, o Options) {
	t.Helper()
	op, admin, updater, reader := p["operator"], p["admin"], p["updater"], p["reader"]
	key := domain.MustKey(ResourceID)
	pcfg := o.Provision
	pcfg.Webhooks = true // the webhook function's role is checked on its feed

	t.Run("the operator provisions, idempotently", func(t *testing.T) {
		if _, err := provision.Run(testenv.Context(t, 30*time.Second), op.JS, pcfg); err != nil {
			t.Fatalf("provision: %v", err)
		}
		rep, err := provision.Run(testenv.Context(t, 30*time.Second), op.JS, pcfg)
		if err != nil || rep.Changed() {
			t.Fatalf("provision again: changed %v, %v", rep.Changed(), err)
		}
	})

	// The command, emitter and notices functions run as their users until the end of the test,
	// unless the stack runs its own. The webhook function (a function-role party) delivers to
	// this endpoint.
	var hooks atomic.Int64
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hooks.Add(1) }))
	t.Cleanup(hookSrv.Close)
	if o.RunFunctions {
		runFunctions(t, p, op, hookSrv.URL)
	}

	t.Run("the admin sends a command and reads the record and the events", func(t *testing.T) {
		c := newClient(t, admin)
		ctx := testenv.Context(t, 20*time.Second)
		w, err := c.Watch(ctx, client.WatchOptions{ResourceID: ResourceID})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		res, err := c.Send(ctx, cmd("c-1", domain.TaskPending))
		if err != nil || res.Event.Outcome != domain.OutcomeApplied || res.Entity.Record.State != domain.StatePending {
			t.Fatalf("send: %+v, %v", res, err)
		}
		if ev, err := w.Next(ctx); err != nil || ev.CommandID != "c-1" {
			t.Errorf("watch: %+v, %v", ev, err)
		}
		if evs, err := c.History(ctx, ResourceID); err != nil || len(evs) != 1 {
			t.Errorf("history: %d events, %v", len(evs), err)
		}
		if letters, err := dlq.List(ctx, admin.JS); err != nil || len(letters) != 0 {
			t.Errorf("dead letters: %v, %v", letters, err)
		}
	})

	t.Run("the updater reports the outcome of an update", func(t *testing.T) {
		ctx := testenv.Context(t, 20*time.Second)
		if _, err := newClient(t, admin).Send(ctx, cmd("c-2", domain.TaskEverything)); err != nil {
			t.Fatalf("start: %v", err)
		}
		res, err := newClient(t, updater).Send(ctx, cmd("c-3", domain.TaskUpdateSucceeded))
		if err != nil || res.Entity.Record.State != domain.StateNone || res.Entity.Record.Updating {
			t.Fatalf("succeeded: %+v, %v", res, err)
		}
	})

	t.Run("the reader reads the record and the events", func(t *testing.T) {
		c := newClient(t, reader)
		ctx := testenv.Context(t, 10*time.Second)
		if e, err := c.Get(ctx, ResourceID); err != nil || e.Record.LastCommandID != "c-3" {
			t.Errorf("get: %+v, %v", e, err)
		}
		// The sender saw c-3's outcome on the wire, which can be a moment before the events
		// stream has stored it: ask until it has.
		evs, err := c.History(ctx, ResourceID)
		for ; err == nil && len(evs) < 3 && ctx.Err() == nil; evs, err = c.History(ctx, ResourceID) {
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || len(evs) != 3 {
			t.Errorf("history: %d events, %v", len(evs), err)
		}
		n := 0
		if err := c.Scan(ctx, func(client.Entity, error) error { n++; return nil }); err != nil || n != 1 {
			t.Errorf("scan: %d records, %v", n, err)
		}
	})

	t.Run("a function dead-letters a command and the admin replays it", func(t *testing.T) {
		ctx := testenv.Context(t, 20*time.Second)
		body, err := cmd("d-1", domain.TaskCustomerActionNeeded).Encode()
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(domain.DLQSubject(key))
		m.Data = body
		m.Header.Set(function.HeaderDLQReason, "test")
		if ack, err := p["command"].PublishMsg(ctx, m); err != nil || ack.Stream != domain.DLQStream {
			t.Fatalf("dead letter: %+v, %v", ack, err)
		}
		letters, err := dlq.List(ctx, admin.JS)
		if err != nil || len(letters) != 1 || letters[0].CommandID != "d-1" {
			t.Fatalf("dead letters: %+v, %v", letters, err)
		}
		w, err := newClient(t, admin).Watch(ctx, client.WatchOptions{ResourceID: ResourceID})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := dlq.Replay(ctx, admin.JS, letters[0].Seq); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if ev, err := w.Next(ctx); err != nil || ev.CommandID != "d-1" || ev.Outcome != domain.OutcomeApplied {
			t.Fatalf("outcome of the replayed command: %+v, %v", ev, err)
		}
		if letters, err := dlq.List(ctx, admin.JS); err != nil || len(letters) != 0 {
			t.Errorf("dead letters after the replay: %+v, %v", letters, err)
		}
	})

	t.Run("the customer sets its policy, reschedules its entity and reads them", func(t *testing.T) {
		checkCustomer(t, newClient(t, admin), newClient(t, p["customer"]), newClient(t, reader))
	})

	if o.RunFunctions {
		t.Run("the webhook function delivers the events", func(t *testing.T) {
			ctx := testenv.Context(t, 10*time.Second)
			for hooks.Load() < 4 && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
			if n := hooks.Load(); n < 4 {
				t.Fatalf("%d deliveries, want the 4 events", n)
			}
		})
	}

	t.Run("the functions acknowledge what they handle", func(t *testing.T) {
		ctx := testenv.Context(t, 15*time.Second)
		cfg, err := pcfg.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		var delivered uint64
		for _, c := range provision.Consumers(cfg) {
			f, _ := registry.Of(c.Stream, c.Durable)
			if c.Stream == domain.ScheduleStream { // a tick consumer (the campaign function serves commands too)
				// A tick function acknowledges each tick after its run: at least one by now.
				for consumerInfo(t, op, c.Stream, c.Durable).AckFloor.Consumer == 0 {
					select {
					case <-ctx.Done():
						t.Fatalf("the %s function acknowledged no tick", f.Name)
					case <-time.After(200 * time.Millisecond):
					}
				}
				continue
			}
			// An ack reaches the consumer's state a moment after the outcome is out: ask again
			// until the ack floor has caught up (or the test's time is up). Compared in consumer
			// sequences: a filtered consumer's stream sequence moves past the messages of other
			// partitions without delivering them, and its stream ack floor may stay behind.
			settled := func(ci *jetstream.ConsumerInfo) bool {
				return ci.NumAckPending == 0 && ci.AckFloor.Consumer == ci.Delivered.Consumer
			}
			ci := consumerInfo(t, op, c.Stream, c.Durable)
			for !settled(ci) && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				ci = consumerInfo(t, op, c.Stream, c.Durable)
			}
			if !settled(ci) {
				t.Errorf("%s: %d pending acks, ack floor %d, delivered %d (consumer sequences)", ci.Name, ci.NumAckPending, ci.AckFloor.Consumer, ci.Delivered.Consumer)
			}
			if c.Stream == domain.CommandsStream {
				delivered += ci.Delivered.Consumer
			}
		}
		if delivered != 6 {
			t.Errorf("%d commands delivered, want 6 (4, and the customer's announcement and reschedule)", delivered)
		}
	})

	t.Run("the notices function publishes a reminder that the admin watches and the reader lists", func(t *testing.T) {
		ctx := testenv.Context(t, 20*time.Second)
		id := ResourceID + "-notices"
		w, err := newClient(t, admin).WatchNotices(ctx, client.WatchOptions{ResourceID: id})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		c := cmd("n-1", domain.TaskPending)
		c.ResourceID = id
		c.Window = &domain.Window{Start: time.Now().Add(time.Hour).Truncate(time.Second), End: time.Now().Add(2 * time.Hour).Truncate(time.Second)}
		if _, err := newClient(t, admin).Send(ctx, c); err != nil {
			t.Fatalf("pending: %v", err)
		}
		// Lead 2 h here, 24 h under maintctl up's default ladder: the nearest rung due.
		if n, err := w.Next(ctx); err != nil || n.Kind != domain.NoticeReminder {
			t.Fatalf("watched notice: %+v, %v", n, err)
		}
		if ns, err := newClient(t, reader).Notices(ctx, id); err != nil || len(ns) != 1 {
			t.Errorf("notices: %+v, %v", ns, err)
		}
	})

	t.Run("the admin creates a campaign that the campaign function announces", func(t *testing.T) {
		checkCampaign(t, admin)
	})

	t.Run("the allowed paths hit no permission violation", func(t *testing.T) {
		for _, pt := range p {
			if strings.Contains(pt.Log.String(), "permission violation") {
				t.Errorf("%s:\n%s", pt.Name, pt.Log)
			}
		}
	})

	// Denied actions, each tried by the roles that must not do it.
	events := streamConfig(t, op, domain.EventsStream)
	events.MaxAge = time.Hour
	cell := domain.CellOf(key)
	kvCfg := streamConfig(t, op, cell.RecordsStream())
	kvCfg.MaxMsgsPerSubject = 100
	publish := func(subject string) func(context.Context, *Party) error {
		return func(ctx context.Context, pt *Party) error {
			_, err := pt.Publish(ctx, subject, []byte(`{}`))
			return err
		}
	}
	request := func(subject string) func(context.Context, *Party) error {
		return func(ctx context.Context, pt *Party) error {
			return pt.Guard(ctx, subject, func(ctx context.Context) error {
				_, err := pt.NC.RequestWithContext(ctx, subject, []byte(`{"seq":1}`))
				return err
			})
		}
	}
	jsAPI := func(fn func(context.Context, jetstream.JetStream) error) func(context.Context, *Party) error {
		return func(ctx context.Context, pt *Party) error {
			return pt.Guard(ctx, "$JS.API.>", func(ctx context.Context) error { return fn(ctx, pt.JS) })
		}
	}
	notOperator := []string{"admin", "updater", "command", "emitter", "campaign", "reader", "customer"}
	notFunction := []string{"admin", "updater", "campaign", "reader", "customer"}
	denied := []struct {
		action string
		by     []string
		do     func(context.Context, *Party) error
	}{
		{"publish a command", []string{"command", "emitter", "reader"}, publish(domain.CommandSubject(key))},
		{"send a campaign command", []string{"updater", "command", "emitter", "campaign", "reader", "customer"}, publish(domain.CampaignCommandSubject("roles"))},
		{"publish a policy command", []string{"command", "emitter", "campaign", "reader", "updater"}, publish(domain.PolicyCommandSubject(key))},
		{"publish an outcome event", notFunction, publish(domain.EventSubject(key))},
		{"publish a policy's outcome event", notFunction, publish(domain.PolicyEventSubject(key))},
		{"publish a dead letter", notFunction, publish(domain.DLQSubject(key))},
		{"publish a notice", notFunction, publish(domain.NoticeSubject(key))},
		{"write a policy in the bucket", notFunction, publish(domain.PolicySubject(key))},
		{"delete a policy revision", notOperator, request("$JS.API.STREAM.MSG.DELETE." + domain.PoliciesBucketStream)},
		{"read the policy commands stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.OrderedConsumer(ctx, domain.PoliciesStream, jetstream.OrderedConsumerConfig{})
			return err
		})},
		{"purge the policies bucket", notOperator, request("$JS.API.STREAM.PURGE." + domain.PoliciesBucketStream)},
		{"delete a notice", notOperator, request("$JS.API.STREAM.MSG.DELETE." + domain.NoticesStream)},
		{"write a record", notFunction, func(ctx context.Context, pt *Party) error {
			return pt.Guard(ctx, "$KV."+cell.RecordsBucket()+".>", func(ctx context.Context) error {
				kv, err := pt.JS.KeyValue(ctx, cell.RecordsBucket())
				if err != nil {
					return err
				}
				_, err = kv.Put(ctx, domain.Located(key), []byte(`{"state":"None"}`))
				return err
			})
		}},
		// Their content: a consumer of the stream (the emitter may read its size, as every
		// stream's, for cluster.maintenance.stream.*; an empty stream lists nothing without one).
		{"read dead letters", []string{"updater", "command", "emitter", "campaign", "reader", "customer"}, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.OrderedConsumer(ctx, domain.DLQStream, jetstream.OrderedConsumerConfig{})
			return err
		})},
		{"read the commands stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.OrderedConsumer(ctx, domain.CommandsStream, jetstream.OrderedConsumerConfig{})
			return err
		})},
		{"provision", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := provision.Run(ctx, js, provision.Config{Tick: time.Second, EventsMaxAge: time.Hour, Replicas: o.Provision.Replicas, Webhooks: true})
			return err
		})},
		{"create a stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
			return err
		})},
		{"update the events stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.UpdateStream(ctx, events)
			return err
		})},
		{"update the bucket", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.UpdateStream(ctx, kvCfg)
			return err
		})},
		{"purge the events stream", notOperator, request("$JS.API.STREAM.PURGE." + domain.EventsStream)},
		{"purge the bucket", notOperator, request("$JS.API.STREAM.PURGE." + cell.RecordsStream())},
		{"delete an event", notOperator, request("$JS.API.STREAM.MSG.DELETE." + domain.EventsStream)},
		{"delete a dead letter", []string{"updater", "command", "emitter", "campaign", "reader", "customer"}, request("$JS.API.STREAM.MSG.DELETE." + domain.DLQStream)},
		{"delete the commands stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteStream(ctx, domain.CommandsStream)
		})},
		{"delete the bucket", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteKeyValue(ctx, cell.RecordsBucket())
		})},
		{"delete a function's consumer", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			return js.DeleteConsumer(ctx, domain.CommandsStream, domain.CommandConsumer(0))
		})},
		{"take over a webhook subscription's consumer", notFunction, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateOrUpdateConsumer(ctx, domain.WebhookStream, jetstream.ConsumerConfig{Durable: domain.WebhookConsumer("roles"), AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})},
		{"read the webhook feed", notFunction, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.OrderedConsumer(ctx, domain.WebhookStream, jetstream.OrderedConsumerConfig{})
			return err
		})},
		{"send a webhook delivery again", []string{"updater", "command", "emitter", "campaign", "reader", "customer"}, publish(domain.WebhookReplaySubject("roles", key))},
		{"create a consumer on the commands stream", notOperator, jsAPI(func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateConsumer(ctx, domain.CommandsStream, jetstream.ConsumerConfig{Durable: "thief", AckPolicy: jetstream.AckExplicitPolicy})
			return err
		})},
	}
	for _, d := range denied {
		for _, name := range d.by {
			t.Run(name+" may not "+d.action, func(t *testing.T) {
				start := time.Now()
				err := d.do(testenv.Context(t, 10*time.Second), p[name])
				if !errors.Is(err, natsconn.ErrPermissionDenied) {
					t.Fatalf("%v, want ErrPermissionDenied", err)
				}
				if took := time.Since(start); took > fast {
					t.Errorf("denied after %s, not at once", took)
				}
			})
		}
	}

	t.Run("the denied actions changed nothing", func(t *testing.T) {
		// Room for a busy machine: on a three-node cluster an ordered read of the history may
		// wait for a replica to catch up, and every check below shares this context.
		ctx := testenv.Context(t, 30*time.Second)
		for _, name := range []string{domain.CommandsStream, domain.EventsStream, domain.DLQStream, domain.ScheduleStream, cell.RecordsStream()} {
			if _, err := op.JS.Stream(ctx, name); err != nil {
				t.Errorf("stream %s: %v", name, err)
			}
		}
		if cfg := streamConfig(t, op, domain.EventsStream); cfg.MaxAge != provision.DefaultConfig().EventsMaxAge {
			t.Errorf("events max age %s", cfg.MaxAge)
		}
		if cfg := streamConfig(t, op, cell.RecordsStream()); cfg.MaxMsgsPerSubject != 1 {
			t.Errorf("bucket history %d", cfg.MaxMsgsPerSubject)
		}
		if evs, err := newClient(t, op).History(ctx, ResourceID); err != nil || len(evs) != 4 {
			t.Errorf("history: %d events, %v", len(evs), err)
		}
		if e, err := newClient(t, op).Get(ctx, ResourceID); err != nil || e.Record.LastCommandID != "d-1" {
			t.Errorf("record: %+v, %v", e.Record, err)
		}
		consumerInfo(t, op, domain.CommandsStream, domain.CommandConsumer(0))
		if _, err := op.JS.Consumer(ctx, domain.CommandsStream, "thief"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("consumer thief: %v", err)
		}
		if _, err := op.JS.Stream(ctx, "EVIL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream EVIL: %v", err)
		}
	})

	t.Run("the operator may create, update, purge and delete streams", func(t *testing.T) {
		ctx := testenv.Context(t, 10*time.Second)
		cfg := jetstream.StreamConfig{Name: "SCRATCH", Subjects: []string{"scratch.>"}}
		s, err := op.JS.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxAge = time.Hour
		if _, err := op.JS.UpdateStream(ctx, cfg); err != nil {
			t.Errorf("update: %v", err)
		}
		if err := s.Purge(ctx); err != nil {
			t.Errorf("purge: %v", err)
		}
		if err := op.JS.DeleteStream(ctx, "SCRATCH"); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
}

// checkCampaign: the admin stores a list of one entity and creates a campaign over it, whose
// window the campaign function announces at once (the lead covers it), as its own user.
func checkCampaign(t *testing.T, admin *Party) {
	ctx := testenv.Context(t, 30*time.Second)
	id := ResourceID + "-campaign"
	ref := testenv.UploadList(t, ctx, admin.JS, []string{id})
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	doc := campaignspec.Document{ID: "roles", Task: domain.TaskEverything, Selection: campaignspec.SelectionDocument{List: &ref},
		Window: campaignspec.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339), Deadline: earliest.Add(72 * time.Hour).Format(time.RFC3339)},
		Spread: campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 10, MaxPerSlotPerSubscription: 10}, AnnounceLead: "336h"}
	c := newClient(t, admin)
	if _, err := c.SendCampaign(ctx, campaign.Control{ID: "roles-create", Campaign: "roles", Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		t.Fatalf("create: %v", err)
	}
	for {
		e, err := c.Get(ctx, id)
		if err == nil && e.Record.State == domain.StatePending && e.Record.Campaign != nil && e.Record.Campaign.ID == "roles" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the campaign's window was not announced: %+v, %v", e, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got, err := c.Campaign(ctx, "roles"); err != nil || got.Status != campaign.StatusActive {
		t.Errorf("campaign: %+v, %v", got, err)
	}
}

// checkCustomer: at the NATS level the customer sets the policy of an entity, sends its
// Reschedule (the admin announced the window) and reads the policy and the record; the reader
// reads the policy too. (Which of these take effect, where commands are signed, is the
// signature's to decide: shared/signing.)
func checkCustomer(t *testing.T, admin, customer, reader *client.Client) {
	t.Helper()
	ctx := testenv.Context(t, 20*time.Second)
	id := ResourceID + "-customer"
	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	announce := cmd("a-1", domain.TaskPending)
	announce.ResourceID, announce.Window = id, &domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	if _, err := admin.Send(ctx, announce); err != nil {
		t.Fatalf("announce: %v", err)
	}
	if res, err := customer.SendPolicy(ctx, policy.Command{ID: "p-1", Scope: id, Policy: &policy.Document{AllowReschedule: true}, Actor: "customer"}); err != nil || res.Event.Outcome != domain.OutcomeApplied {
		t.Fatalf("policy: %+v, %v", res, err)
	}
	move := cmd("r-1", domain.TaskReschedule)
	move.ResourceID, move.Window = id, &domain.Window{Start: start.Add(24 * time.Hour)}
	res, err := customer.Send(ctx, move)
	if err != nil || res.Entity.Record.Window == nil || !res.Entity.Record.Window.Start.Equal(move.Window.Start) {
		t.Fatalf("reschedule: %+v, %v", res, err)
	}
	for name, c := range map[string]*client.Client{"customer": customer, "reader": reader} {
		if p, ok, err := c.PolicyOf(ctx, id); err != nil || !ok || !p.Policy.AllowReschedule() {
			t.Errorf("%s reads the policy: %+v %t, %v", name, p, ok, err)
		}
		if ps, err := c.Policies(ctx); err != nil || len(ps) != 1 {
			t.Errorf("%s lists the policies: %d, %v", name, len(ps), err)
		}
	}
	if evs, err := customer.History(ctx, id); err != nil || len(evs) != 2 {
		t.Errorf("customer reads the history: %d events, %v", len(evs), err)
	}
}

// runFunctions runs every function of the registry until the test ends, each as the party
// named after it or else the last party of its role (the emitter's user runs the notices and
// webhook functions), with a tick of one second, a reminder ladder of 2 h (a window announced
// 1 h ahead gets its reminder at the next tick) and the webhook function delivering to hookURL.
func runFunctions(t *testing.T, p map[string]*Party, op *Party, hookURL string) {
	t.Helper()
	subs := filepath.Join(t.TempDir(), "subscriptions.json")
	if err := os.WriteFile(subs, []byte(`[{"name":"roles","url":"`+hookURL+`","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The web view on a free port: the default one may be another test's `maintctl up`.
	args := map[string][]string{"notices": {"--remind", "2h"}, "webhook": {"--subscriptions", subs}, "web": {"--web-listen", "127.0.0.1:0"}}
	ctx, cancel := context.WithCancel(context.Background())
	tel, err := telemetry.Setup(ctx, telemetry.Config{Logger: quiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	fns := registry.Functions()
	var wg sync.WaitGroup
	errs := make(chan error, len(fns))
	for _, f := range fns {
		fs := pflag.NewFlagSet(f.Name, pflag.ContinueOnError)
		b := registry.Bind(fs, []registry.Function{f})
		if err := fs.Parse(args[f.Name]); err != nil {
			cancel()
			t.Fatalf("%s %q: %v", f.Name, args[f.Name], err)
		}
		party := partyOf(t, p, f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.Run(ctx, registry.Env{JS: party.JS, Tel: tel, Log: quiet, Tick: time.Second}, nil)
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("function: %v", err)
			}
		}
		_ = tel.Shutdown(context.Background())
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := op.JS.Consumer(testenv.Context(t, time.Second), domain.WebhookStream, domain.WebhookConsumer("roles")); err == nil {
			return
		}
		select {
		case err := <-errs:
			t.Fatalf("a function stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the webhook function did not create its consumers")
		}
	}
}

// partyOf is the party that runs function f: the user named after it, else the last user of
// its role.
func partyOf(t *testing.T, p map[string]*Party, f registry.Function) *Party {
	t.Helper()
	var party *Party
	for _, u := range natsconf.DefaultUsers() {
		if u.Name == f.Name {
			return p[u.Name]
		}
		if string(u.Role) == f.Role {
			party = p[u.Name]
		}
	}
	if party == nil {
		t.Fatalf("no user plays role %s, which function %s needs (natsconf.DefaultUsers)", f.Role, f.Name)
	}
	return party
}

func consumerInfo(t *testing.T, op *Party, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	c, err := op.JS.Consumer(ctx, stream, name)
	if err != nil {
		t.Fatalf("consumer %s/%s: %v", stream, name, err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

func streamConfig(t *testing.T, op *Party, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := op.JS.Stream(testenv.Context(t, 5*time.Second), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().Config
}
