package campaign_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

// Waves in order: the canary waits for approve; the next wave starts when the canary is
// finished; an updater finishes 60 % of it and fails 5 %, past its 4 % threshold, and the
// campaign halts before the last wave is announced; resume is explicit, and the last wave
// starts once the halted one is finished.
func TestCampaign_WavesGateAndThreshold(t *testing.T) {
	s := newStack(t, fn.Config{})
	list := ids(300)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	doc := spec("w1", s.upload(list), earliest, "336h", func(d *campaignspec.Document) {
		d.Spread.MaxPerSlot = 100
		d.Waves = []campaignspec.WaveDocument{
			{Name: "canary", Prefixes: []string{"/subscriptions/sub-0"}, Gate: campaignspec.GateManual},
			{Name: "middle", Prefixes: []string{"/subscriptions/sub-1", "/subscriptions/sub-2"}, FailureThreshold: "4%"},
			{Name: "rest"},
		}
	})
	s.mustControl(core.Control{Campaign: "w1", Action: core.ActionCreate, Spec: &doc})
	s.tick()
	if n := len(s.applied("w1", 1)); n != 0 {
		t.Fatalf("%d announced before the canary's approval", n)
	}
	s.mustControl(core.Control{Campaign: "w1", Action: core.ActionApprove, Wave: "canary"})
	canary := s.waitApplied("w1", 1, 60)
	s.tick()
	if n := len(s.applied("w1", 1)); n != 60 {
		t.Fatalf("%d announced with the canary's approval, want its 60", n)
	}
	wave := func(sub ...string) (out []string) {
		for _, id := range list {
			for _, x := range sub {
				if strings.Contains(id, "/"+x+"/") {
					out = append(out, id)
				}
			}
		}
		return out
	}
	s.work(wave("sub-0"), 100, 0)
	s.tick() // the canary finished: the middle wave opens
	s.tick() // and is announced
	middle := wave("sub-1", "sub-2")
	s.waitApplied("w1", 1, 60+len(middle))
	if n := len(s.applied("w1", 1)); n != 60+len(middle) {
		t.Fatalf("%d announced once the canary finished, want %d", n, 60+len(middle))
	}
	s.work(middle, 60, 5)
	s.tick()
	c := s.report("w1")
	if c.Status != core.StatusHalted {
		t.Fatalf("status %s, phases %v", c.Status, c.Tally.Total())
	}
	s.tick()
	if n := len(s.applied("w1", 1)); n != 60+len(middle) {
		t.Fatalf("%d announced while halted", n)
	}
	var halted bool
	for _, e := range s.campaignEvents("w1") {
		halted = halted || e.ceType == string(core.EventHalted) && e.lifecycle().Wave == "middle"
	}
	if !halted {
		t.Error("no halted event naming the wave")
	}
	s.mustControl(core.Control{Campaign: "w1", Action: core.ActionResume})
	s.finish(middle)
	s.tick()
	s.tick()
	s.waitApplied("w1", 1, len(list))
	if n := len(s.applied("w1", 1)); n != len(list) {
		t.Fatalf("%d announced after the resume, want every entity", n)
	}
	_ = canary
}

// work has the updater start every entity of ids and finish pct % of them, failing fail % of
// them.
func (s *stack) work(ids []string, pct, fail int) {
	s.t.Helper()
	seq++
	for i, id := range ids {
		tag := fmt.Sprintf("%d-%d-%s", seq, i, id[len(id)-6:])
		s.send(domain.Command{ID: "start-" + tag, ResourceID: id, Task: domain.TaskEverything})
		switch share := i * 100 / len(ids); {
		case share < fail:
			s.send(domain.Command{ID: "fail-" + tag, ResourceID: id, Task: domain.TaskUpdateFailed, Error: "boom"})
		case share < pct:
			s.send(domain.Command{ID: "done-" + tag, ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
}

// finish has the updater end every update still in progress among ids.
func (s *stack) finish(ids []string) {
	s.t.Helper()
	for i, id := range ids {
		if r := s.get(id); r.Updating {
			s.send(domain.Command{ID: fmt.Sprintf("late-%d-%s", i, id[len(id)-6:]), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
}

// Retry of the failed entities: a new generation for them only, announced under new ids;
// the other entities and their records untouched; the campaign completes again.
func TestCampaign_RetryFailed(t *testing.T) {
	s := newStack(t, fn.Config{})
	list := ids(50)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: "r1", Action: core.ActionCreate, Spec: ptr(spec("r1", s.upload(list), earliest, "336h", nil))})
	s.waitApplied("r1", 1, len(list))
	s.work(list, 100, 10)
	s.tick()
	c := s.report("r1")
	failed := s.byPhase("r1", core.PhaseFailed)
	if c.Status != core.StatusCompleted || len(failed) != 5 {
		t.Fatalf("%s, %d failed", c.Status, len(failed))
	}
	before := map[string]uint64{}
	for _, id := range list {
		before[id] = s.get(id).LastCommandSeq
	}
	o := s.mustControl(core.Control{Campaign: "r1", Action: core.ActionRetry, Phase: core.PhaseFailed})
	if o.Generation != 2 || o.Status != core.StatusActive {
		t.Fatalf("retry: %+v", o)
	}
	got := s.waitApplied("r1", 2, 5)
	for _, id := range failed {
		if got[domain.MustKey(id)] != 1 {
			t.Errorf("%s not announced again", id)
		}
		if r := s.get(id); r.State != domain.StatePending || r.Campaign == nil || r.Campaign.Generation != 2 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	isFailed := map[string]bool{}
	for _, id := range failed {
		isFailed[id] = true
	}
	for _, id := range list {
		if !isFailed[id] && s.get(id).LastCommandSeq != before[id] {
			t.Errorf("%s was touched by the retry", id)
		}
	}
	s.tick()
	s.work(failed, 100, 0)
	s.tick()
	if c := s.report("r1"); c.Status != core.StatusCompleted || c.Tally.Total().Of(core.PhaseSucceeded) != len(list) {
		t.Errorf("after the retry: %s %v", c.Status, c.Tally.Total())
	}
}
