package campaign_test

import (
	"context"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

// The outbox is published once: a flush cut short after some of its messages (a crash, then
// a restart long after the stream's duplicate window) publishes only the rest; a second
// flush, nothing.
func TestOutbox_PublishesEachMessageOnce(t *testing.T) {
	s := newStack(t, fn.Config{})
	list := ids(10)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: "o1", Action: core.ActionCreate, Spec: ptr(spec("o1", s.upload(list), earliest, "336h", nil))})
	s.waitApplied("o1", 1, len(list))
	// No pass of the replica runs meanwhile: the campaign is read once and saved over that read.
	s.f.Passing(func() { flushCutShort(t, s, list) })
}

func flushCutShort(t *testing.T, s *stack, list []string) {
	ctx := context.Background()
	c, rev, err := s.f.Store().Campaign(ctx, "o1")
	if err != nil {
		t.Fatal(err)
	}
	before := len(s.campaignEvents("o1"))
	for i := range 3 {
		ev := core.Event{ID: "campaign.o1.test." + string(rune('a'+i)), Campaign: "o1", Type: core.EventProgress, Status: c.Status, At: time.Now().UTC()}
		m, err := ev.Message()
		if err != nil {
			t.Fatal(err)
		}
		c.Outbox = append(c.Outbox, m)
	}
	if rev, err = s.f.Store().Save(ctx, c, rev); err != nil {
		t.Fatal(err)
	}
	// The first message went out before the crash.
	if _, err := s.env.JS.PublishMsg(ctx, fn.EventMsg(domain.CampaignEventSubject("o1"), "o1", c.Outbox[0])); err != nil {
		t.Fatal(err)
	}
	n, rev, err := s.f.Flush(ctx, c, rev)
	if err != nil || len(n.Outbox) != 0 {
		t.Fatalf("flush: %v, outbox %d", err, len(n.Outbox))
	}
	if _, _, err := s.f.Flush(ctx, n, rev); err != nil {
		t.Fatal(err)
	}
	evs := s.campaignEvents("o1")[before:]
	var got []string
	for _, e := range evs {
		got = append(got, e.id)
	}
	if len(got) != 3 || got[0] != c.Outbox[0].ID || got[1] != c.Outbox[1].ID || got[2] != c.Outbox[2].ID {
		t.Errorf("published %v, want each of the outbox once, in order", got)
	}
}
