package campaign_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	fn "maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

// With signatures required: campaign commands are an admin's (an updater's is Unauthorized),
// the campaign function signs its announcements with its own key, which the command function
// lets announce and withdraw (role campaign) and nothing else.
func TestCampaign_Signed(t *testing.T) {
	admin, updater, own := key(t), key(t), key(t)
	signers := []signing.Signer{
		{Name: "alice", PublicKey: pub(t, admin), Roles: []signing.Role{signing.RoleAdmin}},
		{Name: "robot", PublicKey: pub(t, updater), Roles: []signing.Role{signing.RoleUpdater}},
		{Name: "campaigns", PublicKey: pub(t, own), Roles: []signing.Role{signing.RoleCampaign}},
	}
	policy, err := signing.NewPolicy(true, signers)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, fn.Config{Auth: policy, Signer: own})
	ctx := context.Background()
	list := ids(20)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	create := core.Control{ID: "create-signed", Campaign: "s1", Action: core.ActionCreate, Spec: ptr(spec("s1", s.upload(list), earliest, "336h", nil))}
	if o := s.signedControl(updater, core.Control{ID: "by-updater", Campaign: "s1", Action: create.Action, Spec: create.Spec}); o.Code != domain.CodeUnauthorized {
		t.Errorf("an updater's create: %+v", o)
	}
	if o := s.signedControl(admin, create); o.Outcome != domain.OutcomeApplied || o.Actor != "alice" {
		t.Fatalf("an admin's create: %+v", o)
	}
	s.waitApplied("s1", 1, len(list))
	for _, ev := range s.events() {
		if _, _, _, _, ok := admission.ParseCommandID(ev.CommandID); ok && ev.Actor != "campaigns" {
			t.Errorf("announcement %s applied as %q, want the campaign function's signer", ev.CommandID, ev.Actor)
		}
	}
	m, err := s.f.CommandMsg(domain.MustKey(list[0]), admission.Command{Command: domain.Command{ID: "forged-start", ResourceID: list[0], Task: domain.TaskEverything}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.env.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	evs := testenv.WaitEvents(t, s.env.JS, domain.MustKey(list[0]), 2, 10*time.Second)
	if last := evs[len(evs)-1]; last.CommandID != "forged-start" || last.Code != domain.CodeUnauthorized {
		t.Errorf("an update signed with the campaign key: %+v", last)
	}
}

func key(t *testing.T) nkeys.KeyPair {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func pub(t *testing.T, kp nkeys.KeyPair) string {
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signedControl publishes ctl signed with kp and returns its outcome.
func (s *stack) signedControl(kp nkeys.KeyPair, ctl core.Control) core.Outcome {
	s.t.Helper()
	ctl.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(ctl)
	if err != nil {
		s.t.Fatal(err)
	}
	m := nats.NewMsg(domain.CampaignCommandSubject(ctl.Campaign))
	m.Data = body
	m.Header.Set(domain.HeaderMsgID, ctl.ID)
	if err := signing.Sign(kp, body, m.Header); err != nil {
		s.t.Fatal(err)
	}
	sub, err := s.env.NC.SubscribeSync(domain.CampaignEventSubject(ctl.Campaign))
	if err != nil {
		s.t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := s.env.JS.PublishMsg(context.Background(), m); err != nil {
		s.t.Fatal(err)
	}
	for {
		msg, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			s.t.Fatalf("outcome of %s: %v", ctl.ID, err)
		}
		if o, ok := outcomeOfMsg(msg.Data, ctl.ID); ok {
			return o
		}
	}
}

func outcomeOfMsg(data []byte, id string) (core.Outcome, bool) {
	var o core.Outcome
	if json.Unmarshal(data, &o) != nil || o.CommandID != id {
		return o, false
	}
	return o, true
}
