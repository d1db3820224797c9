package campaign_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

func TestCommandIDs_TheContractsForms(t *testing.T) {
	sum := sha256.Sum256([]byte(entityKey))
	hex16 := hex.EncodeToString(sum[:])[:16]
	a := campaign.AnnounceID("pucm-2026-12", 3, entityKey)
	w := campaign.WithdrawID("pucm-2026-12", 3, entityKey)
	if a != "campaign.pucm-2026-12.3."+hex16 || w != "campaign.pucm-2026-12.3.withdraw."+hex16 {
		t.Fatalf("ids %s and %s", a, w)
	}
	long := strings.Repeat("z", 40)
	for _, id := range []string{a, w, campaign.WithdrawID(long, 1<<30, entityKey)} {
		if !domain.ValidID(id) {
			t.Errorf("%s is not a valid command id", id)
		}
	}
	for _, c := range []struct {
		id       string
		camp     string
		gen      int
		withdraw bool
		ok       bool
	}{
		{a, "pucm-2026-12", 3, false, true},
		{w, "pucm-2026-12", 3, true, true},
		{"campaign.pucm-2026-12.0." + hex16, "", 0, false, false},
		{"campaign.pucm-2026-12.03." + hex16, "", 0, false, false},
		{"campaign.pucm-2026-12.3." + hex16[:15], "", 0, false, false},
		{"campaign.pucm-2026-12.3.cancel." + hex16, "", 0, false, false},
		{"campaign.PUCM.3." + hex16, "", 0, false, false},
		{"sre-1", "", 0, false, false},
	} {
		camp, gen, withdraw, h, ok := campaign.ParseCommandID(c.id)
		if ok != c.ok || ok && (camp != c.camp || gen != c.gen || withdraw != c.withdraw || h != hex16) {
			t.Errorf("ParseCommandID(%s) = %s %d %t %s %t", c.id, camp, gen, withdraw, h, ok)
		}
	}
}

func TestEventTypes_TheContractsNames(t *testing.T) {
	for _, ty := range campaign.EventTypes {
		if !strings.HasPrefix(string(ty), "io.maintsignals.campaign.") || strings.Count(string(ty), ".") != 3 {
			t.Errorf("%s", ty)
		}
	}
	if got := campaign.OutcomeType(domain.OutcomeDuplicate); got != "io.maintsignals.campaign.command.duplicate" {
		t.Errorf("%s", got)
	}
	if ev := (campaign.Event{Campaign: "c"}); ev.Subject() != "maint.campaign.evt.c" || domain.CampaignCommandSubject("c") != "maint.campaign.cmd.c" ||
		domain.CampaignEntityKey("c", "k/x") != "c.k/x" {
		t.Errorf("subjects %s", ev.Subject())
	}
}

func TestAnnouncementAndWithdrawal_OrdinaryCommandsWithTheCampaignsFields(t *testing.T) {
	c := live(t, campaign.StatusActive)
	e := ent(campaign.PhasePlanned, 1)
	a := campaign.Announcement(c, entityKey, e)
	body, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	if m["task"] != "Pending" || m["campaign"] != "pucm-2026-12" || m["actor"] != "campaign:pucm-2026-12" || m["reason"] != "PUCM: control plane upgrade" ||
		m["resourceId"] != entityID || m["id"] != campaign.AnnounceID(c.ID, 1, entityKey) || m["window"] == nil || m["ifCampaign"] != nil {
		t.Errorf("announcement %s", body)
	}
	if rej := a.Command.Validate(entityKey, a.ID); rej != nil {
		t.Errorf("the announcement is not a valid command: %v", rej)
	}
	c.Status = campaign.StatusCancelled
	w := campaign.Withdrawal(c, entityKey, e)
	body, _ = w.Encode()
	m = map[string]any{}
	json.Unmarshal(body, &m)
	if m["task"] != "None" || m["ifCampaign"] != "pucm-2026-12" || m["campaign"] != nil || m["window"] != nil || !strings.Contains(m["reason"].(string), "cancelled") {
		t.Errorf("withdrawal %s", body)
	}
	if rej := w.Command.Validate(entityKey, w.ID); rej != nil {
		t.Errorf("the withdrawal is not a valid command: %v", rej)
	}
}

func TestAdmit_ACampaignsPendingOnlyOnItsOwnWindow(t *testing.T) {
	c := live(t, campaign.StatusActive)
	a := campaign.Announcement(c, entityKey, ent(campaign.PhasePlanned, 2))
	a.ID = campaign.AnnounceID(c.ID, 2, entityKey)
	w := campaign.Withdrawal(c, entityKey, ent(campaign.PhaseAnnounced, 2))
	ours := &domain.CampaignRef{ID: c.ID, Generation: 1}
	theirs := &domain.CampaignRef{ID: "other", Generation: 1}
	cases := []struct {
		name   string
		r      domain.Record
		c      campaign.Command
		target string
	}{
		{"no window", domain.Record{State: domain.StateNone}, a, ""},
		{"a Pending without a window", domain.Record{State: domain.StatePending}, a, ""},
		{"its own window, an earlier generation", domain.Record{State: domain.StatePlanned, Window: window, Campaign: ours}, a, ""},
		{"an SRE's window", domain.Record{State: domain.StatePending, Window: window}, a, "campaign"},
		{"another campaign's window", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, a, "campaign"},
		{"a Pending with a foreign id", domain.Record{}, func() campaign.Command { x := a; x.ID = "sre-1"; return x }(), "id"},
		{"a Pending with another entity's id", domain.Record{}, func() campaign.Command { x := a; x.ID = campaign.AnnounceID(c.ID, 2, "other"); return x }(), "id"},
		{"campaign on a None", domain.Record{}, func() campaign.Command { x := a; x.Task, x.Window = domain.TaskNone, nil; return x }(), "campaign"},
		{"withdrawal of its window", domain.Record{State: domain.StatePending, Window: window, Campaign: ours}, w, ""},
		{"withdrawal of another's window", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, w, "ifCampaign"},
		{"withdrawal of no window", domain.Record{State: domain.StateNone}, w, "ifCampaign"},
		{"an ordinary command", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, campaign.Command{Command: domain.Command{Task: domain.TaskNone}}, ""},
	}
	for _, tc := range cases {
		ref, rej := campaign.Admit(tc.r, tc.c, entityKey)
		switch {
		case tc.target == "" && rej != nil:
			t.Errorf("%s: %v", tc.name, rej)
		case tc.target != "" && (rej == nil || rej.Target != tc.target):
			t.Errorf("%s: %v, want a refusal on %s", tc.name, rej, tc.target)
		case tc.target == "" && tc.c.Campaign != "" && (ref == nil || *ref != domain.CampaignRef{ID: c.ID, Generation: 2}):
			t.Errorf("%s: carries %+v, want the campaign's generation 2", tc.name, ref)
		case tc.target == "" && tc.c.Campaign == "" && ref != nil:
			t.Errorf("%s: carries %+v, want none", tc.name, ref)
		}
	}
	for _, r := range []domain.Record{{Window: window}, {Window: window, Campaign: theirs}} {
		if _, rej := campaign.Admit(r, a, entityKey); rej.Code != domain.CodeRequestNotAllowed {
			t.Errorf("superseded is %s, want RequestNotAllowed", rej.Code)
		}
	}
}
