package fault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn/natstest"
	"maintsignals/test/testenv"
)

const policyRG = "/subscriptions/0b1f6471-1bf0-4dda-aec3-444455556666/resourceGroups/rg-policy"

func policyEntity(name string) string {
	return policyRG + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
}

// policyStack is a server whose users are the test (everything), the functions (the function
// role) and a command function that may not publish outcomes (blind: it decides, and its
// outcome never leaves, as if it died right before publishing).
type policyStack struct {
	url  string
	js   jetstream.JetStream
	keys map[string]string // seed file by user: function, blind
}

func startPolicyStack(t *testing.T) *policyStack {
	t.Helper()
	fn, blind, self := natstest.NewUser(t), natstest.NewUser(t), natstest.NewUser(t)
	perms, err := natsconf.RoleFunction.Permissions()
	if err != nil {
		t.Fatal(err)
	}
	blinded, _ := natsconf.RoleFunction.Permissions()
	blinded.Publish.Deny = append(blinded.Publish.Deny, domain.EventPrefix+">")
	srv := testenv.Server(t, embedded.Config{Name: "fault-policies", StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Nkeys: []*server.NkeyUser{
		{Nkey: self.Public}, {Nkey: fn.Public, Permissions: perms}, {Nkey: blind.Public, Permissions: blinded},
	}})
	nc, err := srv.Connect(nats.Nkey(self.Public, self.KeyPair.Sign))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js := testenv.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, js, provision.Config{Tick: tick, AckWait: 2 * time.Second}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return &policyStack{url: srv.URL(), js: js, keys: map[string]string{"function": fn.SeedFile, "blind": blind.SeedFile}}
}

// function runs `maintctl function NAME` as user (function or blind).
func (s *policyStack) function(t *testing.T, label, name, user string) *proc {
	t.Helper()
	p := startProc(t, label, procEnv(), "function", name, "--server", s.url, "--nkey", s.keys[user], "--inbox-prefix", natsconf.RoleFunction.InboxPrefix())
	p.WaitFor("function started", 30*time.Second)
	return p
}

// setPolicy publishes a policy command for the resource group and waits for it to apply.
func (s *policyStack) setPolicy(t *testing.T, id, doc string) {
	t.Helper()
	key := domain.MustKey(policyRG)
	m := nats.NewMsg(domain.PolicyCommandSubject(key))
	m.Data = []byte(fmt.Sprintf(`{"id": %q, "scope": %q, "policy": %s}`, id, policyRG, doc))
	m.Header.Set(domain.HeaderMsgID, id)
	if _, err := s.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "policy "+id, func() bool {
		for _, ev := range testenv.PolicyEvents(t, s.js, domain.PolicyEventSubject(key)) {
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

func (s *policyStack) announce(t *testing.T, id, entity string, w domain.Window, force bool) {
	t.Helper()
	c := domain.Command{ID: id, ResourceID: entity, Task: domain.TaskPending, Window: &w, Force: force, Actor: "fault"}
	if _, err := s.js.PublishMsg(context.Background(), testenv.CommandMsg(c)); err != nil {
		t.Fatal(err)
	}
}

// TestProcess_CommandsJudgedByThePolicyOfTheirStoredTime: with maintctl processes. Commands are
// stored while no command function runs and the policy changes between them (open, a blackout
// over their window, deleted); the command function started afterwards judges each by the
// policy of its stored time. Then a command function that cannot publish outcomes decides a
// command under a blackout (it has read the policy and the record), the policy is deleted, the
// process is killed, and the replica that takes the command over decides it alike: one
// outcome, the refusal of its stored time.
func TestProcess_CommandsJudgedByThePolicyOfTheirStoredTime(t *testing.T) {
	needBinary(t)
	s := startPolicyStack(t)
	s.function(t, "policies", "policies", "function")
	start := time.Now().UTC().Add(5 * 24 * time.Hour).Truncate(time.Hour)
	w := domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	freeze := fmt.Sprintf(`{"blackouts": [{"start": %q, "end": %q, "reason": "freeze"}]}`, start.Format(time.DateOnly), start.AddDate(0, 0, 2).Format(time.DateOnly))

	s.setPolicy(t, "open", `{"minNotice": "24h"}`)
	s.announce(t, "before-freeze", policyEntity("c1"), w, false)
	s.setPolicy(t, "freeze", freeze)
	s.announce(t, "in-freeze", policyEntity("c2"), w, false)
	s.announce(t, "forced", policyEntity("c3"), w, true)
	s.setPolicy(t, "lifted", `null`)
	s.announce(t, "after-lift", policyEntity("c4"), w, false)

	cmd := s.function(t, "command-1", "command", "function")
	want := []struct {
		name     string
		outcome  domain.Outcome
		target   string
		override string
	}{
		{"c1", domain.OutcomeApplied, "", ""},
		{"c2", domain.OutcomeRejected, "window", ""},
		{"c3", domain.OutcomeApplied, "", "policy"},
		{"c4", domain.OutcomeApplied, "", ""},
	}
	for _, w := range want {
		ev := testenv.WaitEvents(t, s.js, domain.MustKey(policyEntity(w.name)), 1, 30*time.Second)[0]
		if ev.Outcome != w.outcome || ev.Target != w.target || ev.Override != w.override {
			t.Errorf("%s: %+v, want %s (target %q, override %q)", w.name, ev, w.outcome, w.target, w.override)
		}
	}

	// A crash between reading the policy and publishing the outcome.
	if err := cmd.Term(30 * time.Second); err != nil {
		t.Fatalf("stop command-1: %v", err)
	}
	s.setPolicy(t, "freeze-again", freeze)
	blind := s.function(t, "command-blind", "command", "blind")
	s.announce(t, "in-freeze-again", policyEntity("c5"), w, false)
	blind.WaitFor("command_id=in-freeze-again", 30*time.Second) // decided: the rejection is logged before it is published
	s.setPolicy(t, "lifted-again", `null`)
	blind.Kill()
	if evs := testenv.Events(t, s.js, domain.EventSubject(domain.MustKey(policyEntity("c5")))); len(evs) != 0 {
		t.Fatalf("the blind replica published %+v", evs)
	}
	s.function(t, "command-2", "command", "function")
	evs := testenv.WaitEvents(t, s.js, domain.MustKey(policyEntity("c5")), 1, 30*time.Second)
	time.Sleep(time.Second)
	evs = testenv.Events(t, s.js, domain.EventSubject(domain.MustKey(policyEntity("c5"))))
	if len(evs) != 1 || evs[0].Outcome != domain.OutcomeRejected || evs[0].Target != "window" || evs[0].CommandID != "in-freeze-again" {
		t.Fatalf("after the crash: %+v, want the one refusal of its stored time", evs)
	}
}
