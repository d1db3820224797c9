package campaign_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
)

func TestPhases_DoneAndFinished(t *testing.T) {
	done := map[campaign.Phase]bool{campaign.PhaseSucceeded: true, campaign.PhaseSkipped: true, campaign.PhaseSuperseded: true, campaign.PhaseCleared: true, campaign.PhaseCancelled: true}
	if len(campaign.Phases) != 11 {
		t.Fatalf("%d phases", len(campaign.Phases))
	}
	for _, p := range campaign.Phases {
		if p.Done() != done[p] || p.Finished() != (done[p] || p == campaign.PhaseFailed) || !p.Valid() {
			t.Errorf("%s: done %t finished %t", p, p.Done(), p.Finished())
		}
		if p.Retryable() != (p == campaign.PhaseFailed || p == campaign.PhaseSkipped || p == campaign.PhaseRejected) {
			t.Errorf("%s: retryable %t", p, p.Retryable())
		}
	}
	if campaign.Phase("Planned").Valid() {
		t.Errorf("phases are matched exactly")
	}
}

func TestCounts_EveryPhaseInJSONAndTheySum(t *testing.T) {
	var c campaign.Counts
	c.Add(campaign.PhaseSucceeded, 3)
	c.Add(campaign.PhaseFailed, 1)
	c.Add(campaign.PhasePlanned, 6)
	b, _ := json.Marshal(c)
	want := `{"planned":6,"announced":0,"in_progress":0,"succeeded":3,"failed":1,"skipped":0,"rejected":0,"superseded":0,"cleared":0,"cancelled":0,"overdue":0}`
	if string(b) != want {
		t.Errorf("counts %s", b)
	}
	var back campaign.Counts
	if err := json.Unmarshal(b, &back); err != nil || back != c || back.Total() != 10 || back.Done() != 3 || back.Finished() != 4 {
		t.Errorf("back %v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"done": 1}`), &back); err == nil {
		t.Errorf("an unknown phase decodes")
	}
}

func TestTally_MovesKeepTheSum(t *testing.T) {
	s := spectest.MustSpec(t, []byte(spectest.Example))
	tally := campaign.NewTally(s)
	tally.Add(0, campaign.PhasePlanned)
	tally.Add(1, campaign.PhasePlanned)
	tally.Add(-1, campaign.PhaseSkipped)
	tally.Move(1, campaign.PhasePlanned, campaign.PhaseAnnounced)
	clone := tally.Clone()
	clone.Move(0, campaign.PhasePlanned, campaign.PhaseCancelled)
	if total := tally.Total(); total.Total() != 3 || total.Of(campaign.PhaseAnnounced) != 1 || total.Of(campaign.PhaseSkipped) != 1 || total.Of(campaign.PhaseCancelled) != 0 {
		t.Errorf("tally %v (the clone's move leaked?)", total)
	}
}

func TestEntity_EncodeDecode(t *testing.T) {
	e := retryAt(ent(campaign.PhasePlanned, 2), at)
	b, err := campaign.EncodeEntity(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"phase":"planned"`, `"resourceId":`, `"generation":2`, `"window":{`, `"wave":0`, `"retryAt":`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("entity %s lacks %s", b, k)
		}
	}
	back, err := campaign.DecodeEntity(b)
	if err != nil || back.Phase != e.Phase || !back.Window.Start.Equal(e.Window.Start) || !back.RetryAt.Equal(at) {
		t.Errorf("back %+v %v", back, err)
	}
	if _, err := campaign.DecodeEntity([]byte(`{"phase": "done"}`)); err == nil {
		t.Errorf("an unknown phase decodes")
	}
}

func TestReport_TheStatusCommandsJSON(t *testing.T) {
	c := live(t, campaign.StatusActive)
	tally := tallyOf(c.Compiled(), 0, campaign.PhaseSucceeded, 2)
	tally.Add(1, campaign.PhaseFailed)
	tally.Add(1, campaign.PhaseAnnounced)
	b, _ := json.Marshal(campaign.NewReport(c, tally))
	for _, want := range []string{`"id":"pucm-2026-12"`, `"status":"active"`, `"generation":1`, `"entities":4`, `"done":2`, `"finished":3`,
		`"waves":[{"name":"canary","gate":"manual","opened":true,"approved":true,"entities":2`, `{"name":"rest","failureThreshold":"2%","opened":true,"entities":2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report %s lacks %s", b, want)
		}
	}
}

func TestReplan_AroundTheWindowsThatStand(t *testing.T) {
	s := grid(t, "1h", 1, 2, 0)
	now := before
	keys := entities(t, "/a", "/b", "/c", "/d", "/e")
	standing := &domain.Window{Start: s.Earliest, End: s.Earliest.Add(time.Hour)}
	list := []campaign.Keyed{
		{Key: keys[0].Key, Entity: campaign.Entity{Phase: campaign.PhaseAnnounced, Window: standing}},
		{Key: keys[4].Key, Entity: campaign.Entity{Phase: campaign.PhasePlanned, Generation: 2}},           // retried
		{Key: keys[1].Key, Entity: campaign.Entity{Phase: campaign.PhaseCancelled, Window: standing}},      // gives its slot up
		{Key: keys[2].Key, Entity: campaign.Entity{Phase: campaign.PhasePlanned, Generation: 2, Wave: -1}}, // no wave
		{Key: keys[3].Key, Entity: campaign.Entity{Phase: campaign.PhasePlanned, Generation: 2}},           // retried
	}
	got := campaign.Replan(s, campaign.Settings{}, now, list, nil)
	if len(got) != 3 || got[0].Key != keys[2].Key || got[1].Key != keys[3].Key || got[2].Key != keys[4].Key {
		t.Fatalf("replanned %+v, want c, d, e in key order", got)
	}
	if got[0].Entity.Phase != campaign.PhaseSkipped || got[0].Entity.Reason != "NoWave" {
		t.Errorf("no wave: %+v", got[0].Entity)
	}
	// Slot 0 holds a's window: one place left, d takes it, e goes to slot 1.
	if !got[1].Entity.Window.Start.Equal(s.Earliest) || !got[2].Entity.Window.Start.Equal(s.Earliest.Add(time.Hour)) || got[2].Entity.Generation != 2 {
		t.Errorf("d %+v, e %+v", got[1].Entity.Window, got[2].Entity)
	}
}
