package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// Fleet campaigns (infra/docs/campaigns.md): send a campaign command and wait for its outcome;
// read a campaign's status, every campaign, a campaign's entities.

// CampaignOutcomeError is returned with the outcome when a campaign command was refused or
// dead-lettered.
type CampaignOutcomeError struct{ Outcome campaign.Outcome }

func (e *CampaignOutcomeError) Error() string {
	o := e.Outcome
	s := fmt.Sprintf("campaign command %s (%s %s) %s", o.CommandID, o.Action, o.Campaign, o.Outcome)
	if o.Code != "" {
		s += ": " + string(o.Code)
	}
	if o.Target != "" {
		s += " (target " + o.Target + ")"
	}
	if o.Message != "" {
		s += ": " + o.Message
	}
	return s
}

// SendCampaign publishes ctl on maint.campaign.cmd.<campaign> with Nats-Msg-Id = ctl.ID
// (signed when the client has a key) and waits, until ctx ends, for its outcome on
// maint.campaign.evt.<campaign>. A refused or dead-lettered command returns the outcome and a
// *CampaignOutcomeError; none in time, an error wrapping ErrNoOutcome.
func (c *Client) SendCampaign(ctx context.Context, ctl campaign.Control) (campaign.Outcome, error) {
	msg, err := c.controlMsg(&ctl)
	if err != nil {
		return campaign.Outcome{}, err
	}
	subject := domain.CampaignEventSubject(ctl.Campaign)
	var (
		out   campaign.Outcome
		heard bool // on the wire rather than read from the stream
	)
	a := awaited{what: "campaign command", id: ctl.ID, outcomes: subject, events: "campaign events"}
	err = c.publishAwaiting(ctx, a, msg, func(ctx context.Context, sub *nats.Subscription, ack *jetstream.PubAck) error {
		found := false
		if ack.Duplicate { // its outcome may be out already
			out, found, err = c.storedOutcome(ctx, ctl, time.Time{})
			if err != nil {
				return err
			}
		}
		for !found {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				return fmt.Errorf("%w for campaign command %s: %w", ErrNoOutcome, ctl.ID, err)
			}
			out, found = outcomeOf(m.Data, ctl.ID)
			heard = found
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if heard {
		c.awaitStoredOutcome(ctx, ctl, out)
	}
	if Failed(out.Outcome) {
		return out, &CampaignOutcomeError{Outcome: out}
	}
	return out, nil
}

// outcomeOf reads a campaign event: the outcome of command id, or not.
func outcomeOf(data []byte, id string) (campaign.Outcome, bool) {
	var o campaign.Outcome
	if json.Unmarshal(data, &o) != nil || o.CommandID != id || o.Outcome == "" {
		return campaign.Outcome{}, false
	}
	return o, true
}

// storedOutcome looks for the outcome of ctl among the campaign's stored events.
func (c *Client) storedOutcome(ctx context.Context, ctl campaign.Control, since time.Time) (campaign.Outcome, bool, error) {
	var out campaign.Outcome
	found := false
	err := c.eachStored(ctx, domain.EventsStream, domain.CampaignEventSubject(ctl.Campaign), since, "campaign events", func(data []byte, _ uint64) error {
		if o, ok := outcomeOf(data, ctl.ID); ok {
			out, found = o, true
		}
		return nil
	})
	return out, found, err
}

// awaitStoredOutcome waits, briefly and at best, until the events stream has stored outcome o
// of ctl, as awaitStored does for an entity's command: a read of the campaign's events right
// after the command must include it.
func (c *Client) awaitStoredOutcome(ctx context.Context, ctl campaign.Control, o campaign.Outcome) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Read from a minute before the outcome's time: the function's clock may be ahead of the
	// server's, whose time the stored events carry.
	var since time.Time
	if !o.At.IsZero() {
		since = o.At.Add(-time.Minute)
	}
	for ctx.Err() == nil {
		if _, found, err := c.storedOutcome(ctx, ctl, since); err != nil || found {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// controlMsg checks ctl and builds its message: issuedAt and a signature when the client has
// a key.
func (c *Client) controlMsg(ctl *campaign.Control) (*nats.Msg, error) {
	if c.signer != nil && ctl.IssuedAt == "" {
		ctl.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(ctl)
	if err != nil {
		return nil, fmt.Errorf("encode campaign command: %w", err)
	}
	if _, rej := campaign.DecodeControl(body, ctl.Campaign, ctl.ID); rej != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCommand, rej)
	}
	return signing.Msg(c.signer, domain.CampaignCommandSubject(ctl.Campaign), ctl.ID, body)
}

// ErrNoCampaign is returned for a campaign that does not exist.
var ErrNoCampaign = errors.New("no such campaign")

// campaigns opens the campaigns' buckets.
func (c *Client) campaigns(ctx context.Context) (*campaignstore.Store, error) {
	s, err := campaignstore.Open(ctx, c.JS)
	if err != nil {
		return nil, notProvisioned(err)
	}
	return s, nil
}

// Campaign reads campaign id; ErrNoCampaign when there is none.
func (c *Client) Campaign(ctx context.Context, id string) (*campaign.Campaign, error) {
	var out *campaign.Campaign
	err := c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		s, err := c.campaigns(ctx)
		if err != nil {
			return err
		}
		out, _, err = s.Campaign(ctx, id)
		if err == nil && out == nil {
			err = fmt.Errorf("%w: %s", ErrNoCampaign, id)
		}
		return err
	})
	return out, err
}

// Campaigns reads every campaign, by id.
func (c *Client) Campaigns(ctx context.Context) ([]*campaign.Campaign, error) {
	var out []*campaign.Campaign
	err := c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		s, err := c.campaigns(ctx)
		if err != nil {
			return err
		}
		ids, err := s.IDs(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			cp, _, err := s.Campaign(ctx, id)
			if err != nil {
				return err
			}
			if cp != nil {
				out = append(out, cp)
			}
		}
		return nil
	})
	return out, err
}

// CampaignEntities calls fn for every entity of campaign id, in one pass (not in key order).
func (c *Client) CampaignEntities(ctx context.Context, id string, fn func(campaignstore.Stored) error) error {
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		s, err := c.campaigns(ctx)
		if err != nil {
			return err
		}
		return s.Entities(ctx, id, fn)
	})
}

// WatchCampaign calls fn with campaign id as stored now (nil: none yet) and after each
// change, until ctx ends or fn returns an error (campaignstore.ErrStopWatch: none).
func (c *Client) WatchCampaign(ctx context.Context, id string, fn func(*campaign.Campaign) error) error {
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		s, err := c.campaigns(ctx)
		if err != nil {
			return err
		}
		return s.Watch(ctx, id, fn)
	})
}

// CampaignPhase reads the phase of the entity of resourceID in campaign id (its record's
// campaign); false when the campaign holds none. It is a direct get of the phase's subject,
// which a customer confined to the entity's tenant may ask.
func (c *Client) CampaignPhase(ctx context.Context, resourceID, id string) (campaign.Entity, bool, error) {
	key, err := domain.Key(resourceID)
	if err != nil {
		return campaign.Entity{}, false, err
	}
	if err := c.permits(resourceID, key); err != nil {
		return campaign.Entity{}, false, err
	}
	var m *store.RawMsg
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		m, err = store.LastMsg(ctx, c.JS, "KV_"+domain.CampaignEntitiesBucket, campaignstore.EntitySubject(id, key))
		return err
	})
	switch {
	case errors.Is(err, store.ErrNoMessage):
		return campaign.Entity{}, false, nil
	case errors.Is(err, natsconn.ErrPermissionDenied):
		return campaign.Entity{}, false, fmt.Errorf("%w: the phase of %s in campaign %s: %w", ErrNotPermitted, resourceID, id, err)
	case err != nil:
		return campaign.Entity{}, false, fmt.Errorf("the phase of %s in campaign %s: %w", resourceID, id, err)
	case store.DeletedHeader(m.Header):
		return campaign.Entity{}, false, nil
	}
	e, err := campaign.DecodeEntity(m.Data)
	return e, err == nil, err
}
