package campaign_test

import (
	"fmt"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

// A campaign from its create to completed on real streams: every entity announced once, its
// record carrying the planned window and the campaign, the phases following the updater's
// start, success and failure and an SRE's clear, the burndown summing to the selection, and
// created, progress and completed events with CloudEvents headers.
func TestCampaign_FromCreateToCompleted(t *testing.T) {
	s := newStack(t, fn.Config{})
	list := ids(300)
	ref := s.upload(list)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	o := s.mustControl(core.Control{Campaign: "pucm", Action: core.ActionCreate, Spec: ptr(spec("pucm", ref, earliest, "336h", nil))})
	if o.Outcome != domain.OutcomeApplied || o.Status != core.StatusActive {
		t.Fatalf("create: %+v", o)
	}
	got := s.waitApplied("pucm", 1, len(list))
	phases := s.phases("pucm")
	for _, id := range list {
		key := domain.MustKey(id)
		rec := s.get(id)
		e := phases[key]
		if got[key] != 1 || rec.Campaign == nil || *rec.Campaign != (domain.CampaignRef{ID: "pucm", Generation: 1}) ||
			rec.Window == nil || e.Window == nil || !rec.Window.Start.Equal(e.Window.Start) || rec.Reason != "control plane upgrade" {
			t.Fatalf("%s: %d applied, record %+v, entity %+v", id, got[key], rec, e)
		}
	}
	// The updater works every window; one in twenty fails; an SRE clears one before.
	s.send(domain.Command{ID: "sre-clear", ResourceID: list[7], Task: domain.TaskNone})
	for i, id := range list {
		if i == 7 {
			continue
		}
		s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
		if i%20 == 3 {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateFailed, Error: "boom"})
		} else if i%2 == 0 {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
	s.tick()
	mid := s.report("pucm").Tally.Total()
	if mid.Of(core.PhaseInProgress) == 0 || mid.Total() != len(list) || mid.Of(core.PhaseCleared) != 1 {
		t.Fatalf("half-way: %v", mid)
	}
	for i, id := range list {
		if i != 7 && i%20 != 3 && i%2 == 1 {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
	s.tick()
	c := s.report("pucm")
	end := c.Tally.Total()
	if c.Status != core.StatusCompleted || end.Of(core.PhaseSucceeded) != 284 || end.Of(core.PhaseFailed) != 15 || end.Of(core.PhaseCleared) != 1 {
		t.Fatalf("at the end: %s %v", c.Status, end)
	}
	var types []string
	for _, e := range s.campaignEvents("pucm") {
		if e.subject != "pucm" || e.id == "" {
			t.Errorf("event %s without its CloudEvents subject or id: %+v", e.ceType, e)
		}
		types = append(types, e.ceType)
	}
	want := []string{"io.maintsignals.campaign.command.applied", "io.maintsignals.campaign.created"}
	for range 9 { // 285 of 300 done: nine tenths
		want = append(want, string(core.EventProgress))
	}
	want = append(want, string(core.EventCompleted))
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("campaign events\n got %v\nwant %v", types, want)
	}
}

func ptr[T any](v T) *T { return &v }

func (s *stack) get(id string) domain.Record {
	s.t.Helper()
	e, err := s.cl.Get(t0ctx(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return e.Record
}
