package campaign_test

import (
	"context"
	"errors"
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
