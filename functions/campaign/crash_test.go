package campaign_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	"maintsignals/infra/provision"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

var errCrash = errors.New("crash")

// A pass that stops after publishing its announcements and before writing its entities, and
// one that stops after deciding and before publishing: the next pass neither misses an
// entity nor announces one twice.
func TestCampaign_CrashAroundPublishing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash func(fail func(string, int) error) fn.Hooks
	}{
		{"between publishing and writing", func(fail func(string, int) error) fn.Hooks { return fn.Hooks{AfterPublish: fail} }},
		{"between deciding and publishing", func(fail func(string, int) error) fn.Hooks { return fn.Hooks{BeforePublish: fail} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, fn.Config{})
			crashed := 0
			s.f.SetHooks(tc.crash(func(string, int) error {
				if crashed++; crashed == 1 {
					return errCrash
				}
				return nil
			}))
			list := ids(120)
			earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
			s.mustControl(core.Control{Campaign: "c1", Action: core.ActionCreate, Spec: ptr(spec("c1", s.upload(list), earliest, "336h", nil))})
			testenv.Eventually(t, 10*time.Second, "the crash", func() (done bool) { s.f.Passing(func() { done = crashed > 0 }); return done })
			s.tick()
			got := s.waitApplied("c1", 1, len(list))
			s.tick()
			for k, n := range s.applied("c1", 1) {
				if n != 1 {
					t.Errorf("%s: %d applied announcements", k, n)
				}
			}
			if c := s.report("c1").Tally.Total(); c.Of(core.PhaseAnnounced) != len(list) || len(got) != len(list) {
				t.Errorf("phases %v, %d announced", c, len(got))
			}
		})
	}
}

// A campaign's Pending published again after the commands stream's duplicate window, for an
// entity that holds its window (a function that crashed, and came back late): a duplicate,
// the record untouched, a customer's reschedule included.
func TestCampaign_AnnouncementAgainAfterTheDuplicateWindow(t *testing.T) {
	s := newStack(t, fn.Config{}, testenv.WithProvision(func(c *provision.Config) { c.DuplicateWindow = time.Second }))
	list := ids(3)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: "c2", Action: core.ActionCreate, Spec: ptr(spec("c2", s.upload(list), earliest, "336h", nil))})
	s.waitApplied("c2", 1, len(list))
	before := s.get(list[0])
	time.Sleep(1500 * time.Millisecond)
	c, _, err := s.f.Store().Campaign(context.Background(), "c2")
	if err != nil {
		t.Fatal(err)
	}
	key := domain.MustKey(list[0])
	e, _, _ := s.f.Store().Entity(context.Background(), "c2", key)
	m, err := s.f.CommandMsg(key, core.Announcement(c, key, e.Entity))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := s.env.JS.PublishMsg(context.Background(), m)
	if err != nil || ack.Duplicate {
		t.Fatalf("published again: %+v %v (want stored: the stream's window has passed)", ack, err)
	}
	evs := testenv.WaitEvents(t, s.env.JS, key, 2, 10*time.Second)
	if last := evs[len(evs)-1]; last.Outcome != domain.OutcomeDuplicate || last.Campaign == nil {
		t.Errorf("outcome %+v, want a duplicate naming the campaign", last)
	}
	if after := s.get(list[0]); after.LastCommandSeq != before.LastCommandSeq {
		t.Errorf("the record changed: %+v", after)
	}
}

// A pass of withdrawals (pause --withdraw, cancel) that stops after deciding and before
// publishing, or after publishing and before writing: the next pass withdraws every
// announced entity that has not started exactly once, and none that started.
func TestCampaign_CrashAroundWithdrawing(t *testing.T) {
	for _, action := range []core.Action{core.ActionPause, core.ActionCancel} {
		for _, tc := range []struct {
			name  string
			crash func(fail func(string, int) error) fn.Hooks
		}{
			{"between deciding and publishing", func(fail func(string, int) error) fn.Hooks { return fn.Hooks{BeforePublish: fail} }},
			{"between publishing and writing", func(fail func(string, int) error) fn.Hooks { return fn.Hooks{AfterPublish: fail} }},
		} {
			t.Run(string(action)+" "+tc.name, func(t *testing.T) { crashWithdrawing(t, action, tc.crash) })
		}
	}
}

func crashWithdrawing(t *testing.T, action core.Action, crash func(fail func(string, int) error) fn.Hooks) {
	s, _ := pausing(t, "w"+string(action[0]))
	id := "w" + string(action[0])
	s.now.Add(30 * time.Minute)
	s.tick()
	s.tick() // observes the announcements
	announced := s.byPhase(id, core.PhaseAnnounced)
	if len(announced) < 10 {
		t.Fatalf("%d announced", len(announced))
	}
	started := announced[:2]
	for i, rid := range started {
		s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: rid, Task: domain.TaskEverything})
	}
	s.tick() // observes the starts: what the withdrawal leaves out does not hang on a pass's timing
	crashed, withdrawing := 0, 0
	s.f.SetHooks(crash(func(_ string, n int) error {
		if crashed++; crashed == 1 {
			withdrawing = n
			return errCrash
		}
		return nil
	}))
	s.mustControl(core.Control{Campaign: id, Action: action, Withdraw: action == core.ActionPause})
	testenv.Eventually(t, 10*time.Second, "the crash", func() (done bool) { s.f.Passing(func() { done = crashed > 0 }); return done })
	if withdrawing != len(announced)-len(started) {
		t.Fatalf("the pass that crashed had %d commands, want the %d withdrawals", withdrawing, len(announced)-len(started))
	}
	s.tick()
	testenv.Eventually(t, 20*time.Second, "the withdrawals", func() bool { return len(s.withdrawals(id)) >= len(announced)-len(started) })
	s.tick()
	s.tick()
	w := s.withdrawals(id)
	for _, rid := range announced {
		applied := count(w[domain.MustKey(rid)], domain.OutcomeApplied)
		isStarted := rid == started[0] || rid == started[1]
		switch {
		case isStarted && len(w[domain.MustKey(rid)]) != 0:
			t.Errorf("%s started its update and was sent withdrawals %v", rid, w[domain.MustKey(rid)])
		case !isStarted && applied != 1:
			t.Errorf("%s: withdrawals %v, want one applied", rid, w[domain.MustKey(rid)])
		case !isStarted && s.get(rid).State != domain.StateNone:
			t.Errorf("%s withdrawn but %s", rid, s.get(rid).State)
		}
	}
	if len(w) != len(announced)-len(started) {
		t.Errorf("%d entities were sent withdrawals, want the %d announced and not started", len(w), len(announced)-len(started))
	}
	if ph := s.report(id).Tally.Total(); ph.Of(core.PhaseAnnounced) != 0 || ph.Of(core.PhaseInProgress) != len(started) {
		t.Errorf("after the withdrawals: %v", ph)
	}
}
