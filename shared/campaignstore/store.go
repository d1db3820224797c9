// Package campaignstore keeps fleet campaigns in JetStream: each campaign's own state in the
// campaigns bucket (under its id), its entities' phases in the campaign-entities bucket (under
// <id>.<key>), the selections' lists in the campaign-lists Object Store (named by their
// SHA-256); and it reads what a plan depends on: the lists, the tracked entities, the
// customers' policies. The campaign function and maintctl share it, so that a dry run plans
// from what the function will plan from.
package campaignstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// ErrConflict is returned by Save when the campaign changed since it was read.
var ErrConflict = errors.New("campaign changed since it was read")

// ErrNotProvisioned wraps a bucket that does not exist.
var ErrNotProvisioned = errors.New("not provisioned (run `maintctl provision`)")

// Store is the campaigns' buckets.
type Store struct {
	js        jetstream.JetStream
	campaigns jetstream.KeyValue
	entities  jetstream.KeyValue
}

// Open binds to the buckets, which provisioning created.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	c, err := js.KeyValue(ctx, domain.CampaignsBucket)
	if err != nil {
		return nil, bucketError(domain.CampaignsBucket, err)
	}
	e, err := js.KeyValue(ctx, domain.CampaignEntitiesBucket)
	if err != nil {
		return nil, bucketError(domain.CampaignEntitiesBucket, err)
	}
	return &Store{js: js, campaigns: c, entities: e}, nil
}

func bucketError(name string, err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("bucket %s: %w", name, ErrNotProvisioned)
	}
	return fmt.Errorf("bucket %s: %w", name, err)
}

// EntitiesPrefix is the subject prefix of campaign id's entities in their bucket's stream.
func EntitiesPrefix(id string) string { return "$KV." + domain.CampaignEntitiesBucket + "." + id + "." }

// EntitySubject is where the entity of key of campaign id is written.
func EntitySubject(id, key string) string {
	return "$KV." + domain.CampaignEntitiesBucket + "." + domain.CampaignEntityKey(id, key)
}

// Campaign reads campaign id and its revision; nil and 0 when there is none.
func (s *Store) Campaign(ctx context.Context, id string) (*campaign.Campaign, uint64, error) {
	e, err := s.campaigns.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read campaign %s: %w", id, err)
	}
	c, err := campaign.DecodeCampaign(e.Value())
	if err != nil {
		return nil, 0, err
	}
	return c, e.Revision(), nil
}

// Save writes c over revision rev (0: c is new) and returns the new revision; ErrConflict
// when the campaign moved on.
func (s *Store) Save(ctx context.Context, c *campaign.Campaign, rev uint64) (uint64, error) {
	b, err := c.Encode()
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		rev, err = s.campaigns.Create(ctx, c.ID, b)
	} else {
		rev, err = s.campaigns.Update(ctx, c.ID, b, rev)
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, fmt.Errorf("campaign %s: %w", c.ID, ErrConflict)
	case err != nil:
		return 0, fmt.Errorf("write campaign %s: %w", c.ID, err)
	}
	return rev, nil
}

// IDs lists the campaigns, sorted.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	l, err := s.campaigns.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	var ids []string
	for k := range l.Keys() {
		ids = append(ids, k)
	}
	return sortedStrings(ids), nil
}

// Stored is an entity of a campaign as read, with its key and revision.
type Stored struct {
	Key      string
	Revision uint64
	Entity   campaign.Entity
}

// Entities calls fn for every entity of campaign id, in one streaming pass (in the order they
// were last written, not by key).
func (s *Store) Entities(ctx context.Context, id string, fn func(Stored) error) error {
	return store.ScanLast(ctx, s.js, "KV_"+domain.CampaignEntitiesBucket, EntitiesPrefix(id)+">", func(m jetstream.Msg, seq uint64) error {
		if store.Deleted(m) {
			return nil
		}
		e, err := campaign.DecodeEntity(m.Data())
		if err != nil {
			return fmt.Errorf("campaign %s: %w", id, err)
		}
		return fn(Stored{Key: domain.KeyFromSubject(m.Subject()), Revision: seq, Entity: e})
	})
}

// Entity reads the entity of key of campaign id; false when the campaign has no such entity.
func (s *Store) Entity(ctx context.Context, id, key string) (Stored, bool, error) {
	e, err := s.entities.Get(ctx, domain.CampaignEntityKey(id, key))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return Stored{}, false, nil
	}
	if err != nil {
		return Stored{}, false, fmt.Errorf("read campaign entity: %w", err)
	}
	ent, err := campaign.DecodeEntity(e.Value())
	if err != nil {
		return Stored{}, false, err
	}
	return Stored{Key: key, Revision: e.Revision(), Entity: ent}, true, nil
}

// PutEntity writes the entity of key of campaign id over revision rev; ErrConflict when it
// moved on.
func (s *Store) PutEntity(ctx context.Context, id, key string, e campaign.Entity, rev uint64) error {
	b, err := campaign.EncodeEntity(e)
	if err != nil {
		return err
	}
	_, err = s.entities.Update(ctx, domain.CampaignEntityKey(id, key), b, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("entity %s of campaign %s: %w", key, id, ErrConflict)
	}
	return err
}

// ErrStopWatch, returned by a Watch callback, ends the watch without an error.
var ErrStopWatch = errors.New("stop watching")

// Watch calls fn with campaign id as stored now (nil when there is none yet) and after each
// change, until ctx ends or fn returns an error (ErrStopWatch: none).
func (s *Store) Watch(ctx context.Context, id string, fn func(*campaign.Campaign) error) error {
	w, err := s.campaigns.Watch(ctx, id)
	if err != nil {
		return fmt.Errorf("watch campaign %s: %w", id, err)
	}
	defer func() { _ = w.Stop() }()
	seen := false
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e = <-w.Updates():
		}
		var c *campaign.Campaign
		switch {
		case e == nil && seen, e != nil && e.Operation() != jetstream.KeyValuePut:
			continue // the end of the current value, or a deletion
		case e != nil:
			if c, err = campaign.DecodeCampaign(e.Value()); err != nil {
				return err
			}
		}
		seen = true
		if err := fn(c); err != nil {
			if errors.Is(err, ErrStopWatch) {
				return nil
			}
			return err
		}
	}
}
