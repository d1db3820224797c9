package command_test

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

	"maintsignals/functions/command"
	"maintsignals/functions/policies"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

const policyRG = "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-1"

func inRG(name string) string {
	return policyRG + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
}

// setPolicy sends a policy command for the scope through a running policies function and waits
// for it to apply.
func setPolicy(t *testing.T, js jetstream.JetStream, id, scope, doc string) {
	t.Helper()
	m := nats.NewMsg(domain.PolicyCommandSubject(domain.MustKey(scope)))
	m.Data = []byte(fmt.Sprintf(`{"id": %q, "scope": %q, "policy": %s}`, id, scope, doc))
	m.Header.Set(domain.HeaderMsgID, id)
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "policy "+id+" applied", func() bool {
		for _, ev := range testenv.PolicyEvents(t, js, domain.PolicyEventSubject(domain.MustKey(scope))) {
			if ev.CommandID == id {
				if ev.Outcome != domain.OutcomeApplied {
					t.Fatalf("policy %s: %+v", id, ev)
				}
				return true
			}
		}
		return false
	})
}

func runPolicies(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = policies.Run(ctx, env.JS, policies.Config{}) }()
	t.Cleanup(func() { cancel(); <-done })
}

// blackoutOver is a policy with a blackout on the dates of w (local to UTC).
func blackoutOver(w domain.Window) string {
	return fmt.Sprintf(`{"blackouts": [{"start": %q, "end": %q, "reason": "freeze"}]}`, w.Start.Format(time.DateOnly), w.End.AddDate(0, 0, 1).Format(time.DateOnly))
}

// TestHandle_JudgedByThePolicyOfTheStoredTime: commands are stored while no command function
// runs, the policy changing between them; started afterwards, the function judges each by the
// policy as it stood when the command was stored, not as it stands now. A forced command goes
// through with "override": "policy".
func TestHandle_JudgedByThePolicyOfTheStoredTime(t *testing.T) {
	env := testenv.Start(t)
	runPolicies(t, env)
	start := time.Now().UTC().Add(5 * 24 * time.Hour).Truncate(time.Hour)
	w := domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	pending := func(id, name string, force bool) domain.Command {
		return domain.Command{ID: id, ResourceID: inRG(name), Task: domain.TaskPending, Window: &w, Force: force}
	}
	setPolicy(t, env.JS, "open", policyRG, `{"minNotice": "24h"}`)
	send(t, env.JS, pending("before-freeze", "c1", false))
	setPolicy(t, env.JS, "freeze", policyRG, blackoutOver(w))
	send(t, env.JS, pending("in-freeze", "c2", false))
	send(t, env.JS, pending("forced", "c3", true))
	setPolicy(t, env.JS, "lifted", policyRG, `null`)
	send(t, env.JS, pending("after-lift", "c4", false))

	startReplicas(t, env, 2, command.Config{})
	want := map[string]struct {
		outcome  domain.Outcome
		target   string
		override string
	}{
		"c1": {domain.OutcomeApplied, "", ""},
		"c2": {domain.OutcomeRejected, "window", ""},
		"c3": {domain.OutcomeApplied, "", "policy"},
		"c4": {domain.OutcomeApplied, "", ""},
	}
	for name, w := range want {
		ev := events(t, env.JS, domain.MustKey(inRG(name)), 1)[0]
		if ev.Outcome != w.outcome || ev.Target != w.target || ev.Override != w.override {
			t.Errorf("%s: %+v, want %s (target %q, override %q)", name, ev, w.outcome, w.target, w.override)
		}
		if name == "c2" && !strings.Contains(ev.Message, "overlaps the blackout") {
			t.Errorf("c2's refusal: %s", ev.Message)
		}
	}
}

// heldEvents holds the first outcome publish until released, then fails it: the command was
// judged (the policy read) and its outcome never left, as if the replica died there.
type heldEvents struct {
	command.Publisher
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (h *heldEvents) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.reached)
		<-h.release
		return nil, errors.New("injected: the replica stopped before publishing")
	}
	return h.Publisher.PublishMsg(ctx, m, opts...)
}

// TestHandle_RedeliveryAfterThePolicyChangedDecidesAlike: the policy is read and the command
// refused, but the outcome is lost; the policy is then lifted, and the redelivery refuses the
// command again, by the policy of its stored time, with one outcome in all.
func TestHandle_RedeliveryAfterThePolicyChangedDecidesAlike(t *testing.T) {
	env := testenv.Start(t)
	runPolicies(t, env)
	start := time.Now().UTC().Add(5 * 24 * time.Hour).Truncate(time.Hour)
	w := domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	setPolicy(t, env.JS, "freeze", policyRG, blackoutOver(w))
	held := &heldEvents{Publisher: env.JS, reached: make(chan struct{}), release: make(chan struct{})}
	startReplicas(t, env, 1, command.Config{Events: held})
	send(t, env.JS, domain.Command{ID: "in-freeze", ResourceID: inRG("c1"), Task: domain.TaskPending, Window: &w})
	select {
	case <-held.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the command was never judged")
	}
	setPolicy(t, env.JS, "lifted", policyRG, `null`)
	close(held.release)
	evs := events(t, env.JS, domain.MustKey(inRG("c1")), 1)
	time.Sleep(300 * time.Millisecond)
	evs = events(t, env.JS, domain.MustKey(inRG("c1")), len(evs))
	if len(evs) != 1 || evs[0].Outcome != domain.OutcomeRejected || evs[0].Target != "window" {
		t.Fatalf("outcomes %+v, want the one refusal of its stored time", evs)
	}
	if r, _ := record(t, env, domain.MustKey(inRG("c1"))); r.State != domain.StateNone {
		t.Errorf("record %+v changed", r)
	}
}

// TestHandle_CustomerSigner: with signatures required, a customer signer reschedules the
// announced window of an entity of its scope (its name the actor), and nothing else: not an
// entity outside its scopes, not an announcement, an update, a clear or an outcome.
func TestHandle_CustomerSigner(t *testing.T) {
	admin, _ := nkeys.CreateUser()
	customer, _ := nkeys.CreateUser()
	pub := func(kp nkeys.KeyPair) string { k, _ := kp.PublicKey(); return k }
	auth, err := signing.NewPolicy(true, []signing.Signer{
		{Name: "alice", PublicKey: pub(admin), Roles: []signing.Role{signing.RoleAdmin}},
		{Name: "contoso", PublicKey: pub(customer), Roles: []signing.Role{signing.RoleCustomer}, Scopes: []string{policyRG}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	runPolicies(t, env)
	setPolicy(t, env.JS, "reschedule", "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333", `{"allowReschedule": true}`)
	startReplicas(t, env, 1, command.Config{Auth: auth})
	outside := "/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-2/providers/Microsoft.RedHatOpenShift/openShiftClusters/c9"
	start := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Second)
	w := &domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	moved := &domain.Window{Start: start.Add(24 * time.Hour)}
	for i, id := range []string{inRG("c1"), outside} {
		if _, err := env.JS.PublishMsg(context.Background(), signedMsg(t, admin, domain.Command{ID: fmt.Sprintf("a-%d", i), ResourceID: id, Task: domain.TaskPending, Window: w}, "")); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name    string
		cmd     domain.Command
		outcome domain.Outcome
		actor   string
	}{
		{"reschedules its entity", domain.Command{ID: "c-1", ResourceID: inRG("c1"), Task: domain.TaskReschedule, Window: moved}, domain.OutcomeApplied, "contoso"},
		{"may not reschedule outside its scopes", domain.Command{ID: "c-2", ResourceID: outside, Task: domain.TaskReschedule, Window: moved}, domain.OutcomeRejected, ""},
		{"may not announce", domain.Command{ID: "c-3", ResourceID: inRG("c1"), Task: domain.TaskPending, Window: w}, domain.OutcomeRejected, ""},
		{"may not start an update", domain.Command{ID: "c-4", ResourceID: inRG("c1"), Task: domain.TaskEverything, Force: true}, domain.OutcomeRejected, ""},
		{"may not clear", domain.Command{ID: "c-5", ResourceID: inRG("c1"), Task: domain.TaskNone}, domain.OutcomeRejected, ""},
		{"may not report an outcome", domain.Command{ID: "c-6", ResourceID: inRG("c1"), Task: domain.TaskUpdateFailed, Error: "x"}, domain.OutcomeRejected, ""},
	}
	for _, s := range steps {
		if _, err := env.JS.PublishMsg(context.Background(), signedMsg(t, customer, s.cmd, s.cmd.ID)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]domain.Event{}
	for _, id := range []string{inRG("c1"), outside} {
		for _, ev := range events(t, env.JS, domain.MustKey(id), map[string]int{inRG("c1"): 6, outside: 2}[id]) {
			got[ev.CommandID] = ev
		}
	}
	for _, s := range steps {
		ev := got[s.cmd.ID]
		if ev.Outcome != s.outcome || ev.Actor != s.actor || s.outcome == domain.OutcomeRejected && ev.Code != domain.CodeUnauthorized {
			t.Errorf("%s: %+v, want %s by %q", s.name, ev, s.outcome, s.actor)
		}
	}
	if r, _ := record(t, env, domain.MustKey(inRG("c1"))); r.State != domain.StatePending || !r.Window.Start.Equal(moved.Start) {
		t.Errorf("record %+v, want Pending with the window moved", r)
	}
}
