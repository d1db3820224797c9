package campaign

import (
	"context"
	"testing"
	"time"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

// The outbox is published once: a flush cut short after some of its messages (a crash, then
// a restart long after the stream's duplicate window) publishes only the rest; a second
// flush, nothing.
func TestOutbox_PublishesEachMessageOnce(t *testing.T) {
	s := newStack(t, Config{})
	ctx := context.Background()
	list := ids(10)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: "o1", Action: core.ActionCreate, Spec: ptr(spec("o1", s.upload(list), earliest, "336h", nil))})
	c, rev, err := s.f.store.Campaign(ctx, "o1")
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
	if rev, err = s.f.store.Save(ctx, c, rev); err != nil {
		t.Fatal(err)
	}
	// The first message went out before the crash.
	if _, err := s.env.JS.PublishMsg(ctx, eventMsg(domain.CampaignEventSubject("o1"), "o1", c.Outbox[0])); err != nil {
		t.Fatal(err)
	}
	n, rev, err := s.f.flush(ctx, c, rev)
	if err != nil || len(n.Outbox) != 0 {
		t.Fatalf("flush: %v, outbox %d", err, len(n.Outbox))
	}
	if _, _, err := s.f.flush(ctx, n, rev); err != nil {
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
