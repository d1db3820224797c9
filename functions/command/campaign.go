package command

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// campaignRules are the fleet campaigns' rules of a command, checked before the notice and the
// transition table:
//   - a campaign's Pending for an entity that already holds that campaign's window of the
//     same generation changes nothing (held): it is a copy published again after the stream's
//     duplicate window, by a campaign function that crashed between publishing and writing;
//     the window stands as it is, a customer's reschedule included;
//   - otherwise admission.Admit: a campaign's Pending applies only over no announced window or
//     its own, and a command with ifCampaign only while the window is that campaign's.
//
// ref is the campaign the record carries once the command applied (nil: the record's own,
// which the transition table keeps or drops with the window).
func campaignRules(rec domain.Record, cmd domain.Command) (ref *domain.CampaignRef, held bool, rej *domain.Rejection) {
	if cmd.Campaign == "" && cmd.IfCampaign == "" {
		return nil, false, nil
	}
	if id, gen, withdraw, _, ok := admission.ParseCommandID(cmd.ID); ok && !withdraw && cmd.Campaign == id &&
		rec.Campaign != nil && *rec.Campaign == (domain.CampaignRef{ID: id, Generation: gen}) {
		return nil, true, nil
	}
	key, err := domain.Key(cmd.ResourceID)
	if err != nil {
		return nil, false, domain.InvalidParameter("resourceId", "%v", err)
	}
	ref, rej = admission.Admit(rec, admission.Command{Command: cmd}, key)
	return ref, false, rej
}

// deadlines reads, and keeps, the deadlines of the campaigns: a spec never changes once
// created, so a deadline read once holds for good.
type deadlines struct {
	js jetstream.JetStream
	mu sync.Mutex
	by map[string]time.Time
}

// Deadline is the deadline of campaign ref, as its bucket holds it (a customer's Reschedule
// may not move a campaign's window past it); zero when the campaign is gone.
func (d *deadlines) Deadline(ctx context.Context, ref domain.CampaignRef) (time.Time, error) {
	id := ref.ID
	d.mu.Lock()
	t, ok := d.by[id]
	d.mu.Unlock()
	if ok {
		return t, nil
	}
	kv, err := d.js.KeyValue(ctx, domain.CampaignsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("campaigns bucket: %w", err)
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read campaign %s: %w", id, err)
	}
	t, err = admission.Deadline(e.Value())
	if err != nil {
		return time.Time{}, nil // not ours to judge: no deadline known
	}
	d.mu.Lock()
	if d.by == nil {
		d.by = map[string]time.Time{}
	}
	d.by[id] = t
	d.mu.Unlock()
	return t, nil
}
