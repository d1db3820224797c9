package subscriptions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/functions/subscriptions"
	"maintsignals/infra/provision"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/subscription"
	"maintsignals/test/testenv"
)

const (
	tenant = "0b1f6471-1bf0-4dda-aec3-111122223333"
	sub    = "/subscriptions/" + tenant
	rg     = sub + "/resourceGroups/rg-1"
	other  = sub + "/resourceGroups/rg-2"
	secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// start runs a replica of the subscriptions function until the test ends.
func start(t *testing.T, env *testenv.Env, cfg subscriptions.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Log = testenv.Quiet()
	a, err := subscriptions.New(ctx, env.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := a.RuntimeConfig()
	rc.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := function.Run(ctx, env.JS, rc); err != nil {
			t.Errorf("subscriptions: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// keyOf is the located name of name in scope.
func keyOf(t *testing.T, scope, name string) string {
	t.Helper()
	sc, err := subscription.ParseScope(scope)
	if err != nil {
		t.Fatal(err)
	}
	return domain.SubscriptionKey(domain.TenantOf(sc.Key), name)
}

// create and remove are the bodies of a create of name in scope and of its delete.
func create(id, name, scope string) string {
	return fmt.Sprintf(`{"id": %q, "action": "create", "name": %q, "scope": %q, "url": "https://hooks.example.com/in?token=s3cr3t", "secret": %q, "actor": "self-declared", "issuedAt": %q}`,
		id, name, scope, secret, time.Now().UTC().Format(time.RFC3339Nano))
}

func remove(id, name, scope string) string {
	return fmt.Sprintf(`{"id": %q, "action": "delete", "name": %q, "scope": %q, "issuedAt": %q}`, id, name, scope, time.Now().UTC().Format(time.RFC3339Nano))
}

// send publishes a subscription command on the subject of name in scope, signed by kp when
// given, and returns its stream sequence.
func send(t *testing.T, js jetstream.JetStream, name, scope, body string, kp nkeys.KeyPair) uint64 {
	t.Helper()
	var id struct{ ID string }
	_ = json.Unmarshal([]byte(body), &id)
	m, err := signing.Msg(kp, domain.SubscriptionCommandSubject(keyOf(t, scope, name)), id.ID, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// outcomes waits for n outcome events of name in scope and returns them, oldest first.
func outcomes(t *testing.T, js jetstream.JetStream, name, scope string, n int) []domain.SubscriptionEvent {
	t.Helper()
	var evs []domain.SubscriptionEvent
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("%d outcomes of %s", n, name), func() bool {
		evs = events(t, js, domain.SubscriptionEventSubject(keyOf(t, scope, name)))
		return len(evs) >= n
	})
	return evs
}

func events(t *testing.T, js jetstream.JetStream, filter string) []domain.SubscriptionEvent {
	t.Helper()
	var out []domain.SubscriptionEvent
	c, err := js.OrderedConsumer(context.Background(), domain.SubscriptionEventsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if strings.Contains(string(m.Data()), secret) || strings.Contains(string(m.Data()), "s3cr3t") {
				t.Fatalf("an outcome event carries the secret or the endpoint: %s", m.Data())
			}
			ev, err := domain.DecodeSubscriptionEvent(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		if n == 0 {
			return out
		}
	}
}

// stored is the record of name in scope and its secret, "" for each when none.
func stored(t *testing.T, js jetstream.JetStream, name, scope string) (record, sec string) {
	t.Helper()
	get := func(bucket string) string {
		kv, err := js.KeyValue(context.Background(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(context.Background(), keyOf(t, scope, name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(e.Value())
	}
	return get(domain.SubscriptionsBucket), get(domain.SubscriptionSecretsBucket)
}

// TestSubscriptions_CreateRefuseDuplicateDelete: a create is applied (the record without its
// secret, the secret apart, the outcome naming the delivery), a second create of the name is
// refused, the same id after the duplicate window is a duplicate, a delete removes record and
// secret, a delete of a name without a subscription is refused; one outcome each, none with
// the secret or the endpoint.
func TestSubscriptions_CreateRefuseDuplicateDelete(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.DuplicateWindow = time.Second }))
	start(t, env, subscriptions.Config{})
	seq := send(t, env.JS, "crm", rg, create("s-1", "crm", rg), nil)
	send(t, env.JS, "crm", rg, create("s-2", "crm", rg), nil)
	evs := outcomes(t, env.JS, "crm", rg, 2)
	want := domain.SubscriptionDelivery(keyOf(t, rg, "crm"), "s-1", seq)
	if evs[0].Outcome != domain.OutcomeApplied || evs[0].Action != domain.SubscriptionCreate || evs[0].Revision == 0 || evs[0].Delivery != want || evs[0].Actor != "self-declared" {
		t.Errorf("create: %+v (delivery want %s)", evs[0], want)
	}
	if evs[1].Outcome != domain.OutcomeRejected || evs[1].Code != domain.CodeRequestNotAllowed || evs[1].Target != "name" {
		t.Errorf("second create: %+v", evs[1])
	}
	rec, sec := stored(t, env.JS, "crm", rg)
	if sec != secret || strings.Contains(rec, secret) || !strings.Contains(rec, `"delivery":"`+want+`"`) {
		t.Errorf("record %s, secret stored %t", rec, sec == secret)
	}
	time.Sleep(1500 * time.Millisecond) // past the duplicate window: only the ledger knows s-1
	send(t, env.JS, "crm", rg, create("s-1", "crm", rg), nil)
	send(t, env.JS, "crm", rg, remove("s-3", "crm", rg), nil)
	send(t, env.JS, "crm", rg, remove("s-4", "crm", rg), nil)
	evs = outcomes(t, env.JS, "crm", rg, 5)
	if evs[2].Outcome != domain.OutcomeDuplicate || evs[3].Outcome != domain.OutcomeApplied || evs[3].Action != domain.SubscriptionDelete {
		t.Errorf("again and delete: %+v, %+v", evs[2], evs[3])
	}
	if evs[4].Outcome != domain.OutcomeRejected || evs[4].Code != domain.CodeInvalidParameter || evs[4].Target != "name" {
		t.Errorf("delete of none: %+v", evs[4])
	}
	if rec, sec := stored(t, env.JS, "crm", rg); rec != "" || sec != "" {
		t.Errorf("after the delete: record %q, secret left %t", rec, sec != "")
	}
	if n := len(events(t, env.JS, domain.SubscriptionEventPrefix+">")); n != 5 {
		t.Errorf("%d outcomes in all, want 5", n)
	}
}

// flakyEvents fails the first n outcome publishes: the revision is written, its event is not.
type flakyEvents struct {
	subscriptions.Publisher
	mu sync.Mutex
	n  int
}

func (f *flakyEvents) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected: events stream unreachable")
	}
	return f.Publisher.PublishMsg(ctx, m, opts...)
}

// TestSubscriptions_CrashBetweenWriteAndOutcome: the record (and the secret) are written but the
// outcome fails; the retry finds its own command in the revision and publishes the same
// outcome, once, with no second revision; a delete's retry likewise.
func TestSubscriptions_CrashBetweenWriteAndOutcome(t *testing.T) {
	env := testenv.Start(t)
	flaky := &flakyEvents{Publisher: env.JS, n: 2}
	start(t, env, subscriptions.Config{Events: flaky})
	send(t, env.JS, "crm", rg, create("s-1", "crm", rg), nil)
	evs := outcomes(t, env.JS, "crm", rg, 1)
	bucket, err := env.JS.Stream(context.Background(), domain.SubscriptionsBucketStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := bucket.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Outcome != domain.OutcomeApplied || info.State.LastSeq != 1 || evs[0].Revision != 1 {
		t.Errorf("outcome %+v, bucket's last revision %d: want one applied, naming revision 1", evs[0], info.State.LastSeq)
	}
	flaky.mu.Lock()
	flaky.n = 2
	flaky.mu.Unlock()
	send(t, env.JS, "crm", rg, remove("s-2", "crm", rg), nil)
	evs = outcomes(t, env.JS, "crm", rg, 2)
	time.Sleep(300 * time.Millisecond)
	if evs = outcomes(t, env.JS, "crm", rg, 2); len(evs) != 2 || evs[1].Outcome != domain.OutcomeApplied || evs[1].Revision != 2 {
		t.Fatalf("outcomes %+v, want the delete applied once at revision 2", evs)
	}
	if rec, sec := stored(t, env.JS, "crm", rg); rec != "" || sec != "" {
		t.Errorf("after the delete: record %q, secret left %t", rec, sec != "")
	}
}

// TestSubscriptions_SignersAndScopes: with signatures required, a customer creates and deletes
// the subscriptions of its scopes only, Unauthorized outside them (another resource group,
// the subscription above its own, another tenant's subscription to delete); an admin may any;
// an updater none; an unsigned command is refused; the signer's name is the actor.
func TestSubscriptions_SignersAndScopes(t *testing.T) {
	env := testenv.Start(t)
	admin, _ := nkeys.CreateUser()
	customer, _ := nkeys.CreateUser()
	updater, _ := nkeys.CreateUser()
	pub := func(kp nkeys.KeyPair) string { k, _ := kp.PublicKey(); return k }
	auth, err := signing.NewPolicy(true, []signing.Signer{
		{Name: "alice", PublicKey: pub(admin), Roles: []signing.Role{signing.RoleAdmin}},
		{Name: "contoso", PublicKey: pub(customer), Roles: []signing.Role{signing.RoleCustomer}, Scopes: []string{rg}},
		{Name: "robot", PublicKey: pub(updater), Roles: []signing.Role{signing.RoleUpdater}},
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, env, subscriptions.Config{Auth: auth})
	cluster := rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	for _, tc := range []struct {
		name, id, scope, body string
		kp                    nkeys.KeyPair
		want                  domain.Outcome
		actor                 string
	}{
		{"rg", "c-rg", rg, "", customer, domain.OutcomeApplied, "contoso"},
		{"one", "c-one", cluster, "", customer, domain.OutcomeApplied, "contoso"},
		{"other-rg", "c-other", other, "", customer, domain.OutcomeRejected, ""},
		{"sub", "c-sub", sub, "", customer, domain.OutcomeRejected, ""},
		{"theirs", "a-theirs", other, "", admin, domain.OutcomeApplied, "alice"},
		{"theirs", "c-del-theirs", other, remove("c-del-theirs", "theirs", other), customer, domain.OutcomeRejected, ""},
		{"robot", "u-rg", rg, "", updater, domain.OutcomeRejected, ""},
		{"anon", "none", rg, "", nil, domain.OutcomeRejected, ""},
		{"rg", "c-del", rg, remove("c-del", "rg", rg), customer, domain.OutcomeApplied, "contoso"},
	} {
		body := tc.body
		if body == "" {
			body = create(tc.id, tc.name, tc.scope)
		}
		send(t, env.JS, tc.name, tc.scope, body, tc.kp)
		evs := outcomes(t, env.JS, tc.name, tc.scope, 1)
		for evs[len(evs)-1].CommandID != tc.id {
			evs = outcomes(t, env.JS, tc.name, tc.scope, len(evs)+1)
		}
		ev := evs[len(evs)-1]
		if ev.Outcome != tc.want || ev.Actor != tc.actor || tc.want == domain.OutcomeRejected && ev.Code != domain.CodeUnauthorized {
			t.Errorf("%s: %+v, want %s by %q", tc.id, ev, tc.want, tc.actor)
		}
	}
	if rec, _ := stored(t, env.JS, "theirs", other); rec == "" {
		t.Error("the customer's refused delete removed another's subscription")
	}
}

// TestSubscriptions_DeadLetterAndReplay: a name whose revision cannot be read (its header is
// not JSON: written by hand) dead-letters the command with a dead_lettered outcome, and the
// dead letter shows no secret; once repaired, `dlq replay` sends it through the subscriptions
// function again, where it applies.
func TestSubscriptions_DeadLetterAndReplay(t *testing.T) {
	env := testenv.Start(t)
	start(t, env, subscriptions.Config{})
	bad := nats.NewMsg(domain.SubscriptionSubject(keyOf(t, rg, "crm")))
	bad.Data = []byte(`{}`)
	bad.Header.Set(domain.HeaderSubscriptionMeta, "{not json")
	if _, err := env.JS.PublishMsg(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	send(t, env.JS, "crm", rg, create("s-1", "crm", rg), nil)
	evs := outcomes(t, env.JS, "crm", rg, 1)
	if evs[0].Outcome != domain.OutcomeDeadLettered || evs[0].CommandID != "s-1" {
		t.Fatalf("outcome %+v, want dead_lettered", evs[0])
	}
	letters, err := dlq.List(context.Background(), env.JS)
	if err != nil || len(letters) != 1 || letters[0].CommandID != "s-1" || strings.Contains(string(letters[0].Body), secret) {
		t.Fatalf("dead letters %+v, %v: want s-1, its secret redacted", letters, err)
	}
	kv, _ := env.JS.KeyValue(context.Background(), domain.SubscriptionsBucket)
	if err := kv.Delete(context.Background(), keyOf(t, rg, "crm")); err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.Replay(context.Background(), env.JS, letters[0].Seq); err != nil {
		t.Fatal(err)
	}
	evs = outcomes(t, env.JS, "crm", rg, 2)
	if rec, sec := stored(t, env.JS, "crm", rg); evs[1].Outcome != domain.OutcomeApplied || rec == "" || sec != secret {
		t.Errorf("after the replay: %+v, record %q", evs[1], rec)
	}
}

// TestSubscriptions_RefusedAtTheGate: a body that does not read, and one sent on another name's
// subject, are rejected with their target; nothing is written.
func TestSubscriptions_RefusedAtTheGate(t *testing.T) {
	env := testenv.Start(t)
	start(t, env, subscriptions.Config{})
	m := nats.NewMsg(domain.SubscriptionCommandSubject(keyOf(t, rg, "crm")))
	m.Data = []byte(`{"id": "s-1", "action": "create"`)
	m.Header.Set(domain.HeaderMsgID, "s-1")
	if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	send(t, env.JS, "crm", rg, create("s-2", "crm", other), nil) // scope of rg-2, subject of rg-1
	evs := outcomes(t, env.JS, "crm", rg, 2)
	if evs[0].Code != domain.CodeInvalidRequestContent || evs[0].CommandID != "s-1" {
		t.Errorf("not JSON: %+v", evs[0])
	}
	if evs[1].Code != domain.CodeInvalidParameter || evs[1].Target != "scope" {
		t.Errorf("another name's subject: %+v", evs[1])
	}
	if rec, sec := stored(t, env.JS, "crm", rg); rec != "" || sec != "" {
		t.Errorf("refused commands wrote %q", rec)
	}
}
