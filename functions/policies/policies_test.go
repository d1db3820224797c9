package policies_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/functions/policies"
	"maintsignals/infra/provision"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

const (
	sub   = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333"
	rg    = sub + "/resourceGroups/rg-1"
	rgDoc = `{"timeZone": "Europe/Berlin", "windows": [{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}], "minNotice": "72h"}`
)

// start runs a replica of the policies function until the test ends.
func start(t *testing.T, env *testenv.Env, cfg policies.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := policies.New(ctx, env.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := a.RuntimeConfig()
	rc.Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := function.Run(ctx, env.JS, rc); err != nil {
			t.Errorf("policies: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// policyMsg is a policy command as an integrator publishes it: id also in Nats-Msg-Id, signed
// by kp when given.
func policyMsg(t *testing.T, id, scope, policy string, kp nkeys.KeyPair) *nats.Msg {
	t.Helper()
	body := fmt.Sprintf(`{"id": %q, "scope": %q, "policy": %s, "actor": "self-declared", "issuedAt": %q}`, id, scope, policy, time.Now().UTC().Format(time.RFC3339Nano))
	m := nats.NewMsg(domain.PolicyCommandSubject(domain.MustKey(scope)))
	m.Data = []byte(body)
	m.Header.Set(domain.HeaderMsgID, id)
	if kp != nil {
		if err := signing.Sign(kp, m.Data, m.Header); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func publish(t *testing.T, js jetstream.JetStream, m *nats.Msg) {
	t.Helper()
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// outcomes waits for n policy outcome events of scope.
func outcomes(t *testing.T, js jetstream.JetStream, scope string, n int) []domain.PolicyEvent {
	t.Helper()
	var evs []domain.PolicyEvent
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("%d policy outcomes of %s", n, scope), func() bool {
		evs = testenv.PolicyEvents(t, js, domain.PolicyEventSubject(domain.MustKey(scope)))
		return len(evs) >= n
	})
	return evs
}

// stored is the scope's value in the bucket, "" when it has none.
func stored(t *testing.T, js jetstream.JetStream, scope string) string {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), domain.PoliciesBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), domain.PolicyKey(domain.MustKey(scope)))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

// TestPolicies_SetRefuseDeleteAndDuplicate: a policy is set (the bucket holds the document with
// its scope), a malformed one is refused with its target and changes nothing, the same id sent
// again after the duplicate window is a duplicate, a delete removes it; one outcome each.
func TestPolicies_SetRefuseDeleteAndDuplicate(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.DuplicateWindow = time.Second }))
	start(t, env, policies.Config{})
	publish(t, env.JS, policyMsg(t, "p-1", rg, rgDoc, nil))
	publish(t, env.JS, policyMsg(t, "p-2", rg, `{"windows": [{"rrule": "FREQ=YEARLY", "start": "22:00", "duration": "6h"}]}`, nil))
	evs := outcomes(t, env.JS, rg, 2)
	if evs[0].Outcome != domain.OutcomeApplied || evs[0].Action != domain.PolicySet || evs[0].Revision == 0 || evs[0].Actor != "self-declared" {
		t.Errorf("set: %+v", evs[0])
	}
	if evs[1].Outcome != domain.OutcomeRejected || evs[1].Code != domain.CodeInvalidParameter || evs[1].Target != "windows[0].rrule" {
		t.Errorf("malformed: %+v", evs[1])
	}
	if v := stored(t, env.JS, rg); !strings.Contains(v, `"scope":"`+rg+`"`) || !strings.Contains(v, `"minNotice":"72h"`) {
		t.Errorf("bucket holds %s", v)
	}
	time.Sleep(1500 * time.Millisecond) // past the duplicate window: only the ledger knows p-1
	publish(t, env.JS, policyMsg(t, "p-1", rg, `null`, nil))
	publish(t, env.JS, policyMsg(t, "p-3", rg, `null`, nil))
	evs = outcomes(t, env.JS, rg, 4)
	if evs[2].Outcome != domain.OutcomeDuplicate || evs[3].Outcome != domain.OutcomeApplied || evs[3].Action != domain.PolicyDelete {
		t.Errorf("again and delete: %+v, %+v", evs[2], evs[3])
	}
	if v := stored(t, env.JS, rg); v != "" {
		t.Errorf("deleted policy still holds %s", v)
	}
	if n := len(testenv.PolicyEvents(t, env.JS, domain.PolicyEventPrefix+"*")); n != 4 {
		t.Errorf("%d outcomes in all, want 4", n)
	}
	if n := len(testenv.Events(t, env.JS, domain.AllEventsFilter)); n != 0 {
		t.Errorf("readers of the entities' events see %d events", n)
	}
}

// flakyEvents fails the first n outcome publishes: the revision is written, its event is not.
type flakyEvents struct {
	policies.Publisher
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

// TestPolicies_CrashBetweenWriteAndOutcome: the revision is written but its outcome fails; the
// retry finds its own command in the revision and publishes the same outcome, once, with no
// second revision.
func TestPolicies_CrashBetweenWriteAndOutcome(t *testing.T) {
	env := testenv.Start(t)
	start(t, env, policies.Config{Events: &flakyEvents{Publisher: env.JS, n: 2}})
	publish(t, env.JS, policyMsg(t, "p-1", rg, rgDoc, nil))
	evs := outcomes(t, env.JS, rg, 1)
	time.Sleep(300 * time.Millisecond)
	if evs = outcomes(t, env.JS, rg, 1); len(evs) != 1 || evs[0].Outcome != domain.OutcomeApplied {
		t.Fatalf("outcomes %+v, want one applied", evs)
	}
	s, err := env.JS.Stream(context.Background(), domain.PoliciesBucketStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || evs[0].Revision != info.State.LastSeq {
		t.Errorf("bucket has %d revisions (last %d), outcome names %d: want one, named", info.State.Msgs, info.State.LastSeq, evs[0].Revision)
	}
}

// TestPolicies_SignersAndScopes: with signatures required, a customer sets and deletes the
// policies within its scopes only; an admin sets any; an updater none; an unsigned command is
// refused; the signer's name is the actor.
func TestPolicies_SignersAndScopes(t *testing.T) {
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
	start(t, env, policies.Config{Auth: auth})
	cluster := rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1"
	for _, tc := range []struct {
		id, scope string
		kp        nkeys.KeyPair
		want      domain.Outcome
		actor     string
	}{
		{"c-rg", rg, customer, domain.OutcomeApplied, "contoso"},
		{"c-one", cluster, customer, domain.OutcomeApplied, "contoso"},
		{"c-sub", sub, customer, domain.OutcomeRejected, ""},
		{"a-sub", sub, admin, domain.OutcomeApplied, "alice"},
		{"u-rg", rg, updater, domain.OutcomeRejected, ""},
		{"none", rg, nil, domain.OutcomeRejected, ""},
	} {
		publish(t, env.JS, policyMsg(t, tc.id, tc.scope, `{"minNotice": "24h"}`, tc.kp))
		evs := outcomes(t, env.JS, tc.scope, 1)
		ev := evs[len(evs)-1]
		for ev.CommandID != tc.id {
			evs = outcomes(t, env.JS, tc.scope, len(evs)+1)
			ev = evs[len(evs)-1]
		}
		if ev.Outcome != tc.want || ev.Actor != tc.actor || tc.want == domain.OutcomeRejected && ev.Code != domain.CodeUnauthorized {
			t.Errorf("%s: %+v, want %s by %q", tc.id, ev, tc.want, tc.actor)
		}
	}
	publish(t, env.JS, policyMsg(t, "c-del", rg, `null`, customer))
	if evs := outcomes(t, env.JS, rg, 4); evs[3].Outcome != domain.OutcomeApplied || stored(t, env.JS, rg) != "" {
		t.Errorf("customer's delete: %+v", evs[3])
	}
}

// TestPolicies_DeadLetterAndReplay: a scope whose revision cannot be read (its header is not
// JSON: written by hand) dead-letters the command with a dead_lettered outcome; once repaired,
// `dlq replay` sends the command through the policies function again, where it applies.
func TestPolicies_DeadLetterAndReplay(t *testing.T) {
	env := testenv.Start(t)
	start(t, env, policies.Config{})
	bad := nats.NewMsg(domain.PolicySubject(domain.MustKey(rg)))
	bad.Data = []byte(`{"scope": "` + rg + `"}`)
	bad.Header.Set(domain.HeaderPolicyMeta, "{not json")
	publish(t, env.JS, bad)
	publish(t, env.JS, policyMsg(t, "p-1", rg, rgDoc, nil))
	evs := outcomes(t, env.JS, rg, 1)
	if evs[0].Outcome != domain.OutcomeDeadLettered || evs[0].CommandID != "p-1" {
		t.Fatalf("outcome %+v, want dead_lettered", evs[0])
	}
	letters, err := dlq.List(context.Background(), env.JS)
	if err != nil || len(letters) != 1 || letters[0].CommandID != "p-1" {
		t.Fatalf("dead letters %+v, %v", letters, err)
	}
	kv, _ := env.JS.KeyValue(context.Background(), domain.PoliciesBucket)
	if err := kv.Delete(context.Background(), domain.PolicyKey(domain.MustKey(rg))); err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.Replay(context.Background(), env.JS, letters[0].Seq); err != nil {
		t.Fatal(err)
	}
	evs = outcomes(t, env.JS, rg, 2)
	if evs[1].Outcome != domain.OutcomeApplied || !strings.Contains(stored(t, env.JS, rg), "72h") {
		t.Errorf("after the replay: %+v, bucket %s", evs[1], stored(t, env.JS, rg))
	}
}
