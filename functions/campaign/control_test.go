package campaign_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	"maintsignals/infra/provision"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// Campaign commands each have one outcome: a create again with the same spec is a duplicate,
// with another spec refused on spec; a list that is not stored, a command for a campaign that
// does not exist, a command id applied before, sent again after the stream's duplicate window.
func TestCampaign_CommandsOutcomes(t *testing.T) {
	s := newStack(t, fn.Config{}, testenv.WithProvision(func(c *provision.Config) { c.DuplicateWindow = time.Second }))
	list := ids(10)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	doc := spec("c3", s.upload(list), earliest, "336h", nil)
	s.mustControl(core.Control{ID: "create-1", Campaign: "c3", Action: core.ActionCreate, Spec: &doc})
	time.Sleep(2 * time.Second) // past the stream's duplicate window, with room: the server purges it on a timer
	for _, tc := range []struct {
		name    string
		ctl     core.Control
		outcome domain.Outcome
		code    domain.Code
		target  string
	}{
		{"the same spec again", core.Control{Campaign: "c3", Action: core.ActionCreate, Spec: &doc}, domain.OutcomeDuplicate, "", ""},
		{"another spec", core.Control{Campaign: "c3", Action: core.ActionCreate, Spec: ptr(spec("c3", *doc.Selection.List, earliest, "300h", nil))}, domain.OutcomeRejected, domain.CodeInvalidParameter, "spec"},
		{"the same command id again", core.Control{ID: "create-1", Campaign: "c3", Action: core.ActionCreate, Spec: &doc}, domain.OutcomeDuplicate, "", ""},
		{"a list not stored", core.Control{Campaign: "c4", Action: core.ActionCreate, Spec: ptr(spec("c4", campaignspec.ListRef{Object: "nope", SHA256: doc.Selection.List.SHA256, Count: 10}, earliest, "336h", nil))},
			domain.OutcomeRejected, domain.CodeInvalidParameter, "selection.list.object"},
		{"no such campaign", core.Control{Campaign: "c5", Action: core.ActionPause}, domain.OutcomeRejected, domain.CodeRequestNotAllowed, "campaign"},
		{"a wave it does not have", core.Control{Campaign: "c3", Action: core.ActionApprove, Wave: "canary"}, domain.OutcomeRejected, domain.CodeInvalidParameter, "wave"},
		{"a resume of an active campaign changes nothing", core.Control{Campaign: "c3", Action: core.ActionResume}, domain.OutcomeApplied, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := s.control(tc.ctl)
			if o.Outcome != tc.outcome || o.Code != tc.code || o.Target != tc.target {
				t.Errorf("outcome %+v, want %s %s %s", o, tc.outcome, tc.code, tc.target)
			}
		})
	}
	// Create, created, and one outcome for each command but the other campaigns': each is
	// stored by the time its sender has it, though it reaches the sender on the wire first.
	if n := len(s.campaignEvents("c3")); n != 7 {
		t.Errorf("%d events of c3, want 7", n)
	}
}

// pausing is the scene of the control tests: 160 entities whose windows come due 15 minutes
// apart (slot by slot) from now, an hour's notice.
func pausing(t *testing.T, id string) (*stack, []string) {
	s := newStack(t, fn.Config{MinNotice: time.Hour})
	list := ids(160)
	earliest := s.now.Now().Truncate(time.Minute).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: id, Action: core.ActionCreate, Spec: ptr(spec(id, s.upload(list), earliest, "3h", nil))})
	return s, list
}

// byPhase lists the entities of a campaign in a phase, by resource ID.
func (s *stack) byPhase(id string, p core.Phase) []string {
	var out []string
	for _, e := range s.phases(id) {
		if e.Phase == p {
			out = append(out, e.ResourceID)
		}
	}
	return out
}

// Pause with withdraw: what is announced and not started is withdrawn once (an entity whose
// window became another's meanwhile refuses it and is superseded), updates in progress are
// left alone, nothing is announced for two ticks; resume plans again the windows that came
// too near, each at least the notice ahead, and announces them as a new generation.
func TestCampaign_PauseWithdrawResume(t *testing.T) {
	s, _ := pausing(t, "p1")
	s.now.Add(30 * time.Minute)
	s.tick()
	s.tick() // observes the announcements
	announced := s.byPhase("p1", core.PhaseAnnounced)
	if len(announced) < 10 {
		t.Fatalf("%d announced", len(announced))
	}
	started, taken := announced[:3], announced[3]
	for i, id := range started {
		s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
	}
	once := false
	s.f.SetHooks(fn.Hooks{BeforePublish: func(string, int) error { // an SRE announces their own window as the withdrawals go out
		if once {
			return nil
		}
		once = true
		w := domain.Window{Start: s.now.Now().Add(5 * time.Hour), End: s.now.Now().Add(6 * time.Hour)}
		s.send(domain.Command{ID: "sre-own", ResourceID: taken, Task: domain.TaskPending, Window: &w})
		return nil
	}})
	o := s.mustControl(core.Control{Campaign: "p1", Action: core.ActionPause, Withdraw: true})
	if o.Status != core.StatusPaused || o.Generation != 2 {
		t.Fatalf("pause: %+v", o)
	}
	testenv.Eventually(t, 20*time.Second, "the withdrawals", func() bool { return len(s.withdrawals("p1")) >= len(announced)-3 })
	s.tick()
	ph := s.report("p1").Tally.Total()
	if ph.Of(core.PhaseAnnounced) != 0 || ph.Of(core.PhaseInProgress) != 3 || ph.Of(core.PhaseSuperseded) != 1 {
		t.Fatalf("after the withdrawals: %v", ph)
	}
	for id, outs := range s.withdrawals("p1") {
		if applied := count(outs, domain.OutcomeApplied); applied > 1 || id == domain.MustKey(taken) && applied != 0 {
			t.Errorf("%s: withdrawals %v", id, outs)
		}
	}
	if outs := s.withdrawals("p1")[domain.MustKey(taken)]; len(outs) != 1 || outs[0] != domain.OutcomeRejected {
		t.Errorf("the withdrawal of the superseded entity: %v, want one refusal", outs)
	}
	if r := s.get(taken); r.Window == nil || r.Campaign != nil {
		t.Errorf("the SRE's window was touched: %+v", r)
	}
	before := len(s.applied("p1", 1)) + len(s.applied("p1", 2))
	s.now.Add(3 * time.Hour) // the withdrawn windows' slots pass
	s.tick()
	s.tick()
	if after := len(s.applied("p1", 1)) + len(s.applied("p1", 2)); after != before {
		t.Errorf("%d announcements applied while paused", after-before)
	}
	resumed := s.now.Now()
	s.mustControl(core.Control{Campaign: "p1", Action: core.ActionResume})
	s.tick()
	again := s.waitApplied("p1", 2, 1)
	for _, ev := range s.events() {
		if _, g, w, _, ok := admission.ParseCommandID(ev.CommandID); ok && g == 2 && !w && ev.Outcome == domain.OutcomeApplied {
			if r := s.get(ev.ResourceID); r.Window.Start.Before(resumed.Add(time.Hour)) {
				t.Errorf("%s announced again at %s, less than the notice after the resume (%s)", ev.ResourceID, r.Window.Start, resumed)
			}
		}
	}
	t.Logf("%d announced in generation 2", len(again))
}

// withdrawals are the outcomes of a campaign's withdrawals, by entity key.
func (s *stack) withdrawals(id string) map[string][]domain.Outcome {
	out := map[string][]domain.Outcome{}
	for _, ev := range s.events() {
		if cid, _, w, _, ok := admission.ParseCommandID(ev.CommandID); ok && cid == id && w {
			k := domain.MustKey(ev.ResourceID)
			out[k] = append(out[k], ev.Outcome)
		}
	}
	return out
}

func count(outs []domain.Outcome, o domain.Outcome) int {
	n := 0
	for _, v := range outs {
		if v == o {
			n++
		}
	}
	return n
}

// Cancel is final: what is planned is cancelled, what is announced and not started withdrawn,
// the updates in progress tracked to their end; the campaign completes as cancelled.
func TestCampaign_Cancel(t *testing.T) {
	s, _ := pausing(t, "x1")
	s.now.Add(30 * time.Minute)
	s.tick()
	s.tick()
	announced := s.byPhase("x1", core.PhaseAnnounced)
	started := announced[:4]
	for i, id := range started {
		s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
	}
	if o := s.mustControl(core.Control{Campaign: "x1", Action: core.ActionCancel}); o.Status != core.StatusCancelled {
		t.Fatalf("cancel: %+v", o)
	}
	testenv.Eventually(t, 20*time.Second, "the withdrawals", func() bool { return len(s.withdrawals("x1")) >= len(announced)-4 })
	s.tick()
	c := s.report("x1")
	ph := c.Tally.Total()
	if ph.Of(core.PhaseInProgress) != 4 || ph.Of(core.PhaseCancelled) != 160-4 || c.Finished {
		t.Fatalf("after cancel: %s %v", c.Status, ph)
	}
	for i, id := range started {
		s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateSucceeded})
	}
	s.tick()
	c = s.report("x1")
	if c.Status != core.StatusCancelled || !c.Finished || c.Tally.Total().Of(core.PhaseSucceeded) != 4 {
		t.Fatalf("at the end: %s finished %t %v", c.Status, c.Finished, c.Tally.Total())
	}
	evs := s.campaignEvents("x1")
	if last := evs[len(evs)-1]; last.ceType != string(core.EventCompleted) || last.lifecycle().Status != core.StatusCancelled {
		t.Errorf("last event %s %+v", last.ceType, last.lifecycle())
	}
	if o, _ := s.control(core.Control{Campaign: "x1", Action: core.ActionResume}); o.Code != domain.CodeRequestNotAllowed {
		t.Errorf("resume of a cancelled campaign: %+v", o)
	}
	_ = context.Background
}

// Pause without withdraw: for two ticks, while more windows come due, nothing new is
// announced and the windows announced stand; resume announces those that came due.
func TestCampaign_PauseStopsAnnouncing(t *testing.T) {
	s, _ := pausing(t, "q1")
	s.now.Add(30 * time.Minute)
	s.tick()
	s.tick()
	announced := s.byPhase("q1", core.PhaseAnnounced)
	if len(announced) < 10 || len(announced) == 160 {
		t.Fatalf("%d announced, want some of the 160", len(announced))
	}
	s.waitApplied("q1", 1, len(announced)) // sent; now applied
	if o := s.mustControl(core.Control{Campaign: "q1", Action: core.ActionPause}); o.Status != core.StatusPaused || o.Generation != 1 {
		t.Fatalf("pause: %+v", o)
	}
	before := len(s.applied("q1", 1))
	s.now.Add(time.Hour) // four more slots come due
	s.tick()
	s.tick()
	time.Sleep(300 * time.Millisecond) // what a pass would have sent is applied by now
	if after := len(s.applied("q1", 1)); after != before {
		t.Errorf("%d announcements applied while paused", after-before)
	}
	if n := len(s.byPhase("q1", core.PhaseAnnounced)); n != len(announced) {
		t.Errorf("%d announced after the pause, want the %d before it", n, len(announced))
	}
	for _, id := range announced {
		if r := s.get(id); r.State != domain.StatePending || r.Campaign == nil {
			t.Errorf("%s: a window announced before the pause became %s", id, r.State)
		}
	}
	s.mustControl(core.Control{Campaign: "q1", Action: core.ActionResume})
	s.tick()
	if after := len(s.waitApplied("q1", 1, before+1)); after <= before {
		t.Errorf("resume announced nothing: %d", after)
	}
}
