package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	core "maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
)

// maxConflicts bounds the rounds of reading again after a compare-and-swap lost a race.
const maxConflicts = 5

// flush publishes the outbox of c (stored at rev) and clears it; it returns the campaign as
// stored then. Every decision that writes a campaign flushes it before deciding anything new.
func (f *Function) flush(ctx context.Context, c *core.Campaign, rev uint64) (*core.Campaign, uint64, error) {
	for range maxConflicts {
		if c == nil || len(c.Outbox) == 0 {
			return c, rev, nil
		}
		if err := f.publishOutbox(ctx, c); err != nil {
			return nil, 0, err
		}
		n := *c
		n.Outbox = nil
		newRev, err := f.store.Save(ctx, &n, rev)
		if errors.Is(err, campaignstore.ErrConflict) {
			if c, rev, err = f.store.Campaign(ctx, c.ID); err != nil {
				return nil, 0, err
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return &n, newRev, nil
	}
	return nil, 0, fmt.Errorf("flush campaign %s: %w", c.ID, campaignstore.ErrConflict)
}

// publishOutbox publishes what of c's outbox the campaign's subject does not hold yet, in
// order, each expecting the subject's last sequence: the subject's last message, if it is one
// of the outbox, is where a flush cut short stopped.
func (f *Function) publishOutbox(ctx context.Context, c *core.Campaign) error {
	subject := domain.CampaignEventSubject(c.ID)
	for range maxConflicts {
		start, seq, err := f.outboxStart(ctx, subject, c.Outbox)
		if err != nil {
			return err
		}
		raced := false
		for _, m := range c.Outbox[start:] {
			ack, err := f.js.PublishMsg(ctx, eventMsg(subject, c.ID, m), jetstream.WithExpectLastSequencePerSubject(seq))
			if isConflict(err) || err == nil && ack.Duplicate {
				raced = true // another replica flushed it meanwhile: see how far it got
				break
			}
			if err != nil {
				return fmt.Errorf("publish campaign event %s: %w", m.ID, err)
			}
			seq = ack.Sequence
			f.log.Info("campaign event published", "campaign", c.ID, "id", m.ID, "type", m.Type)
		}
		if !raced {
			return nil
		}
	}
	return fmt.Errorf("publish campaign events of %s: the subject kept moving", c.ID)
}

// outboxStart is the first message of box the subject does not hold, and the subject's last
// sequence.
func (f *Function) outboxStart(ctx context.Context, subject string, box []core.Message) (int, uint64, error) {
	m, err := f.events.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read the campaign's last event: %w", err)
	}
	id := m.Header.Get(domain.HeaderMsgID)
	for i, o := range box {
		if o.ID == id {
			return i + 1, m.Sequence, nil
		}
	}
	return 0, m.Sequence, nil
}

// eventMsg is a campaign event as published: its body, its id as Nats-Msg-Id and ce-id, the
// campaign as ce-subject.
func eventMsg(subject, campaign string, m core.Message) *nats.Msg {
	out := nats.NewMsg(subject)
	out.Data = m.Body
	out.Header.Set(domain.HeaderMsgID, m.ID)
	domain.SetCloudEventHeaders(out.Header, m.Type, m.ID, campaign, m.Time)
	return out
}
