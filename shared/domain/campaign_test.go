package domain_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

func TestRecord_CampaignIsWrittenOnlyWhenSet(t *testing.T) {
	r := domain.Record{ResourceID: "/subscriptions/s/c1", State: domain.StatePending}
	b, err := domain.EncodeRecord(r)
	if err != nil || strings.Contains(string(b), "campaign") {
		t.Fatalf("record without a campaign encodes as %s (%v): want no campaign field", b, err)
	}
	r.Campaign = &domain.CampaignRef{ID: "pucm-2026-12", Generation: 2}
	b, _ = domain.EncodeRecord(r)
	if !strings.Contains(string(b), `"campaign":{"id":"pucm-2026-12","generation":2}`) {
		t.Fatalf("record encodes as %s: want the campaign object", b)
	}
	back, err := domain.DecodeRecord(b)
	if err != nil || back.Campaign == nil || *back.Campaign != *r.Campaign {
		t.Fatalf("decoded %+v, %v", back.Campaign, err)
	}
	ev, _ := domain.EncodeEvent(domain.Event{CommandID: "c"})
	if strings.Contains(string(ev), "campaign") {
		t.Fatalf("event without a campaign encodes as %s", ev)
	}
}

// The window belongs to the campaign until the window goes: a Pending replaces it, None (or a
// success, which returns to None) clears it; the update's start and failure keep it.
func TestApply_CampaignGoesWithTheWindow(t *testing.T) {
	at := time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC)
	w := &domain.Window{Start: at, End: at.Add(4 * time.Hour)}
	ref := &domain.CampaignRef{ID: "c", Generation: 1}
	pending := domain.Record{ResourceID: "/x", State: domain.StatePending, Window: w, Campaign: ref}
	updating := domain.Record{ResourceID: "/x", State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, Window: w, Campaign: ref}
	cases := []struct {
		name string
		r    domain.Record
		c    domain.Command
		keep bool
	}{
		{"another Pending", pending, domain.Command{Task: domain.TaskPending, Window: w}, false},
		{"an SRE's None", pending, domain.Command{Task: domain.TaskNone}, false},
		{"the update starts", pending, domain.Command{Task: domain.TaskEverything}, true},
		{"customer action needed", pending, domain.Command{Task: domain.TaskCustomerActionNeeded}, true},
		{"the update succeeds", updating, domain.Command{Task: domain.TaskUpdateSucceeded}, false},
		{"the update fails", updating, domain.Command{Task: domain.TaskUpdateFailed, Error: "boom"}, true},
		{"a forced None while updating", updating, domain.Command{Task: domain.TaskNone, Force: true}, false},
	}
	for _, c := range cases {
		c.c.ResourceID = "/x"
		next, _, rej := domain.Apply(c.r, c.c, at)
		if rej != nil {
			t.Fatalf("%s: %v", c.name, rej)
		}
		if kept := next.Campaign != nil; kept != c.keep {
			t.Errorf("%s: campaign kept = %t, want %t", c.name, kept, c.keep)
		}
		if got := domain.EventCampaign(c.r, next); got != ref {
			t.Errorf("%s: the event carries %+v, want the campaign of the window it acted on", c.name, got)
		}
	}
}

func TestEventCampaign_PrefersTheCampaignTheCommandSet(t *testing.T) {
	old, now := &domain.CampaignRef{ID: "c", Generation: 1}, &domain.CampaignRef{ID: "c", Generation: 2}
	if got := domain.EventCampaign(domain.Record{Campaign: old}, domain.Record{Campaign: now}); got != now {
		t.Fatalf("got %+v, want the new generation", got)
	}
	if got := domain.EventCampaign(domain.Record{}, domain.Record{}); got != nil {
		t.Fatalf("got %+v, want none", got)
	}
}
