package admission_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

const (
	entityID  = "/subscriptions/aaaa/resourceGroups/rg/providers/P/c1"
	entityKey = "subscriptions/aaaa/resourcegroups/rg/providers/p/c1"
)

var window = &domain.Window{Start: time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 20, 4, 0, 0, 0, time.UTC)}

func TestCommandIDs_TheContractsForms(t *testing.T) {
	sum := sha256.Sum256([]byte(entityKey))
	hex16 := hex.EncodeToString(sum[:])[:16]
	a := admission.AnnounceID("pucm-2026-12", 3, entityKey)
	w := admission.WithdrawID("pucm-2026-12", 3, entityKey)
	if a != "campaign.pucm-2026-12.3."+hex16 || w != "campaign.pucm-2026-12.3.withdraw."+hex16 {
		t.Fatalf("ids %s and %s", a, w)
	}
	long := strings.Repeat("z", 40)
	for _, id := range []string{a, w, admission.WithdrawID(long, 1<<30, entityKey)} {
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
		camp, gen, withdraw, h, ok := admission.ParseCommandID(c.id)
		if ok != c.ok || ok && (camp != c.camp || gen != c.gen || withdraw != c.withdraw || h != hex16) {
			t.Errorf("ParseCommandID(%s) = %s %d %t %s %t", c.id, camp, gen, withdraw, h, ok)
		}
	}
}

func TestAdmit_ACampaignsPendingOnlyOnItsOwnWindow(t *testing.T) {
	c := struct{ ID string }{"pucm-2026-12"}
	a := admission.Command{Command: domain.Command{ID: admission.AnnounceID(c.ID, 2, entityKey), ResourceID: entityID,
		Task: domain.TaskPending, Window: window, Actor: admission.Actor(c.ID), Campaign: c.ID}}
	w := admission.Command{Command: domain.Command{ID: admission.WithdrawID(c.ID, 2, entityKey), ResourceID: entityID,
		Task: domain.TaskNone, Actor: admission.Actor(c.ID), IfCampaign: c.ID}}
	ours := &domain.CampaignRef{ID: c.ID, Generation: 1}
	theirs := &domain.CampaignRef{ID: "other", Generation: 1}
	cases := []struct {
		name   string
		r      domain.Record
		c      admission.Command
		target string
	}{
		{"no window", domain.Record{State: domain.StateNone}, a, ""},
		{"a Pending without a window", domain.Record{State: domain.StatePending}, a, ""},
		{"its own window, an earlier generation", domain.Record{State: domain.StatePlanned, Window: window, Campaign: ours}, a, ""},
		{"an SRE's window", domain.Record{State: domain.StatePending, Window: window}, a, "campaign"},
		{"another campaign's window", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, a, "campaign"},
		{"a Pending with a foreign id", domain.Record{}, func() admission.Command { x := a; x.ID = "sre-1"; return x }(), "id"},
		{"a Pending with another entity's id", domain.Record{}, func() admission.Command { x := a; x.ID = admission.AnnounceID(c.ID, 2, "other"); return x }(), "id"},
		{"campaign on a None", domain.Record{}, func() admission.Command { x := a; x.Task, x.Window = domain.TaskNone, nil; return x }(), "campaign"},
		{"withdrawal of its window", domain.Record{State: domain.StatePending, Window: window, Campaign: ours}, w, ""},
		{"withdrawal of another's window", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, w, "ifCampaign"},
		{"withdrawal of no window", domain.Record{State: domain.StateNone}, w, "ifCampaign"},
		{"an ordinary command", domain.Record{State: domain.StatePending, Window: window, Campaign: theirs}, admission.Command{Command: domain.Command{Task: domain.TaskNone}}, ""},
	}
	for _, tc := range cases {
		ref, rej := admission.Admit(tc.r, tc.c, entityKey)
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
		if _, rej := admission.Admit(r, a, entityKey); rej.Code != domain.CodeRequestNotAllowed {
			t.Errorf("superseded is %s, want RequestNotAllowed", rej.Code)
		}
	}
}

func TestDeadline_OfTheStoredSpec(t *testing.T) {
	got, err := admission.Deadline([]byte(`{"id":"c","spec":{"id":"c","window":{"length":"4h","earliest":"2026-12-15T00:00:00Z","deadline":"2027-01-15T01:00:00+01:00"}}}`))
	if err != nil || !got.Equal(time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("deadline %v, %v", got, err)
	}
	for _, bad := range []string{`{`, `{"spec":{}}`, `{"spec":{"window":{"deadline":"soon"}}}`} {
		if _, err := admission.Deadline([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
