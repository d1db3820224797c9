package campaign_test

import (
	"slices"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
)

// threeWaves: canary (manual gate) of subscription aaaa, early of bbbb, rest (2%) the others.
func threeWaves(t *testing.T) *campaign.Campaign {
	t.Helper()
	s := spectest.MustSpec(t, spectest.Edit(t, "waves", []any{
		map[string]any{"name": "canary", "prefixes": []any{"/subscriptions/aaaa"}, "gate": "manual"},
		map[string]any{"name": "early", "prefixes": []any{"/subscriptions/bbbb"}, "failureThreshold": "10%"},
		map[string]any{"name": "rest", "failureThreshold": "2%"},
	}))
	c, _ := campaign.Activate(campaign.NewCampaign(s, at), waves(s, 10, 10, 80), at)
	return c
}

// waves tallies n planned entities in each wave.
func waves(s *campaignspec.Spec, n ...int) campaign.Tally {
	t := campaign.NewTally(s)
	for w, k := range n {
		for range k {
			t.Add(w, campaign.PhasePlanned)
		}
	}
	return t
}

func move(t *campaign.Tally, wave, n int, from, to campaign.Phase) {
	for range n {
		t.Move(wave, from, to)
	}
}

func opened(c *campaign.Campaign) []bool {
	var out []bool
	for _, w := range c.Waves {
		out = append(out, w.Opened)
	}
	return out
}

func TestAdvance_WavesInOrderWithTheirGates(t *testing.T) {
	c := threeWaves(t)
	tally := waves(c.Compiled(), 10, 10, 80)
	if !slices.Equal(opened(c), []bool{false, false, false}) {
		t.Fatalf("opened %v before the canary's approval", opened(c))
	}
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionApprove, `, "wave": "canary"`)), tally, at)
	if !slices.Equal(opened(c), []bool{true, false, false}) {
		t.Fatalf("after approve: %v", opened(c))
	}
	move(&tally, 0, 9, campaign.PhasePlanned, campaign.PhaseSucceeded)
	if c, _ = campaign.Advance(c, tally, at); c.Waves[1].Opened {
		t.Fatalf("early opened with a canary entity not finished")
	}
	move(&tally, 0, 1, campaign.PhasePlanned, campaign.PhaseFailed) // failed is finished
	c, fx := campaign.Advance(c, tally, at)
	if !slices.Equal(opened(c), []bool{true, true, false}) || len(fx.Events) != 0 { // 9% done: no tenth yet
		t.Fatalf("after the canary: %v %v", opened(c), types(fx.Events))
	}
	move(&tally, 1, 10, campaign.PhasePlanned, campaign.PhaseSucceeded)
	c, _ = campaign.Advance(c, tally, at)
	if !slices.Equal(opened(c), []bool{true, true, true}) {
		t.Fatalf("after early: %v", opened(c))
	}
	// A retry of the canary's failed entity does not close the waves after it.
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionRetry, `, "phase": "failed"`)), tally, at)
	move(&tally, 0, 1, campaign.PhaseFailed, campaign.PhasePlanned)
	if c, _ = campaign.Advance(c, tally, at); !slices.Equal(opened(c), []bool{true, true, true}) {
		t.Errorf("after a retry: %v", opened(c))
	}
}

func TestAdvance_AWaveFailingPastItsThresholdHaltsBeforeTheNext(t *testing.T) {
	c := threeWaves(t)
	tally := waves(c.Compiled(), 10, 10, 80)
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionApprove, `, "wave": "canary"`)), tally, at)
	move(&tally, 0, 10, campaign.PhasePlanned, campaign.PhaseSucceeded)
	c, _ = campaign.Advance(c, tally, at)
	move(&tally, 1, 1, campaign.PhasePlanned, campaign.PhaseFailed) // 10% of early: not past 10%
	if c, _ = campaign.Advance(c, tally, at); c.Status != campaign.StatusActive {
		t.Fatalf("halted at the threshold: %s", c.Status)
	}
	move(&tally, 1, 1, campaign.PhasePlanned, campaign.PhaseFailed) // 20%: past it
	c, fx := campaign.Advance(c, tally, at)
	if c.Status != campaign.StatusHalted || !slices.Equal(types(fx.Events), []string{"halted"}) || fx.Events[0].Wave != "early" {
		t.Fatalf("%s %v", c.Status, fx.Events)
	}
	move(&tally, 1, 8, campaign.PhasePlanned, campaign.PhaseSucceeded) // early is finished
	if c, _ = campaign.Advance(c, tally, at); c.Waves[2].Opened || c.Status != campaign.StatusHalted {
		t.Fatalf("rest opened while halted: %v %s", opened(c), c.Status)
	}
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionResume, "")), tally, at)
	if c.Status != campaign.StatusActive || !c.Waves[1].Waived || !c.Waves[2].Opened {
		t.Fatalf("after resume: %s %+v", c.Status, c.Waves)
	}
	// A paused campaign halts too, so that the halt is not lost under the pause.
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionPause, "")), tally, at)
	move(&tally, 2, 2, campaign.PhasePlanned, campaign.PhaseFailed) // 2 of 80
	if c, _ = campaign.Advance(c, tally, at); c.Status != campaign.StatusHalted {
		t.Errorf("paused past a threshold: %s", c.Status)
	}
}

func TestAdvance_ProgressEachTenthOnceAndCompletion(t *testing.T) {
	c := threeWaves(t)
	tally := waves(c.Compiled(), 10, 10, 80)
	var all []string
	step := func(wave, n int, from, to campaign.Phase) []campaign.Event {
		move(&tally, wave, n, from, to)
		var fx campaign.Effects
		c, fx = campaign.Advance(c, tally, at)
		all = append(all, types(fx.Events)...)
		return fx.Events
	}
	if evs := step(2, 25, campaign.PhasePlanned, campaign.PhaseSkipped); len(evs) != 2 || evs[0].Done != 1 || evs[1].Done != 2 {
		t.Fatalf("25%% done: %+v", evs)
	}
	step(2, 5, campaign.PhaseSkipped, campaign.PhasePlanned) // retried: back to 20%
	if evs := step(2, 5, campaign.PhasePlanned, campaign.PhaseSkipped); len(evs) != 0 {
		t.Fatalf("25%% again: %+v, want nothing: each tenth is reported once", evs)
	}
	step(2, 55, campaign.PhasePlanned, campaign.PhaseCancelled)
	step(0, 10, campaign.PhasePlanned, campaign.PhaseSucceeded)
	evs := step(1, 10, campaign.PhasePlanned, campaign.PhaseFailed) // finished, not done
	if c.Status != campaign.StatusCompleted || evs[len(evs)-1].Type != campaign.EventCompleted {
		t.Fatalf("everything finished: %s %v", c.Status, types(evs))
	}
	progress := 0
	for _, ty := range all {
		if ty == "progress" {
			progress++
		}
	}
	if progress != 9 { // 90% done: 10 of 100 failed
		t.Errorf("%d progress events, want 9: %v", progress, all)
	}
	if _, fx := campaign.Advance(c, tally, at); len(fx.Events) != 0 {
		t.Errorf("completed twice: %v", types(fx.Events))
	}
}

func TestAdvance_ACancelledCampaignCompletesAsCancelled(t *testing.T) {
	c := threeWaves(t)
	tally := waves(c.Compiled(), 10, 10, 80)
	c, _, _ = campaign.Apply(c, mustControl(t, control(campaign.ActionCancel, "")), tally, at)
	move(&tally, 0, 10, campaign.PhasePlanned, campaign.PhaseCancelled)
	move(&tally, 1, 10, campaign.PhasePlanned, campaign.PhaseCancelled)
	move(&tally, 2, 79, campaign.PhasePlanned, campaign.PhaseCancelled)
	move(&tally, 2, 1, campaign.PhasePlanned, campaign.PhaseInProgress) // left alone, tracked to its end
	c, fx := campaign.Advance(c, tally, at)
	if c.Finished || len(fx.Events) != 9 {
		t.Fatalf("an update still in progress: finished %t, %v", c.Finished, types(fx.Events))
	}
	move(&tally, 2, 1, campaign.PhaseInProgress, campaign.PhaseSucceeded)
	c, fx = campaign.Advance(c, tally, at)
	if c.Status != campaign.StatusCancelled || !c.Finished || !slices.Equal(types(fx.Events), []string{"progress", "completed"}) || fx.Events[1].Status != campaign.StatusCancelled {
		t.Errorf("%s %t %v", c.Status, c.Finished, fx.Events)
	}
}

func TestEvents_IDsFollowFromTheState(t *testing.T) {
	run := func() []string {
		c := threeWaves(t)
		tally := waves(c.Compiled(), 10, 10, 80)
		var ids []string
		c, fx, _ := campaign.Apply(c, mustControl(t, control(campaign.ActionPause, `, "withdraw": true`)), tally, at)
		for _, e := range fx.Events {
			ids = append(ids, e.ID)
		}
		move(&tally, 2, 20, campaign.PhasePlanned, campaign.PhaseSkipped)
		_, fx = campaign.Advance(c, tally, at)
		for _, e := range fx.Events {
			ids = append(ids, e.ID)
		}
		return ids
	}
	a, b := run(), run()
	want := []string{"campaign.pucm-2026-12.2.paused", "campaign.pucm-2026-12.3.progress", "campaign.pucm-2026-12.4.progress"}
	if !slices.Equal(a, want) || !slices.Equal(a, b) {
		t.Errorf("ids %v then %v, want %v", a, b, want)
	}
}
