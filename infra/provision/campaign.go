package provision

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Fleet campaigns: their commands' stream, their two buckets and the Object Store of their
// lists (infra/docs/campaigns.md); the campaign function's consumers are its registry entry's.

// campaignStream is MAINT_CAMPAIGNS, retained like commands (audit, replay).
func campaignStream(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        domain.CampaignsStream,
		Description: "Fleet campaign commands: create, pause, resume, cancel, retry, approve (audit, replay)",
		Subjects:    []string{domain.CampaignCommandPrefix + "*"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      c.CommandsMaxAge,
		Duplicates:  c.DuplicateWindow,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	}
}

// CampaignBuckets are the campaigns' own state (under <id>) and their entities' phases
// (under <id>.<key>).
func CampaignBuckets(c Config) []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: domain.CampaignsBucket, Description: "Fleet campaigns: spec, status, waves, counts", History: 1, Storage: c.Storage, Replicas: c.Replicas},
		{Bucket: domain.CampaignEntitiesBucket, Description: "Fleet campaigns' entities: phase, generation, window", History: 1, Storage: c.Storage, Replicas: c.Replicas},
	}
}

// CampaignLists is the Object Store of the selections' lists, each named by its SHA-256.
func CampaignLists(c Config) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{Bucket: domain.CampaignListsBucket, Description: "Fleet campaigns' lists of resource IDs, by SHA-256", Storage: c.Storage, Replicas: c.Replicas}
}

// ensureObjectStore creates the Object Store when it is missing; an existing one is kept.
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) Change {
	ch := Change{Kind: "objects", Name: want.Bucket}
	_, err := js.ObjectStore(ctx, want.Bucket)
	switch {
	case err == nil:
		ch.Action = Unchanged
	case errors.Is(err, jetstream.ErrBucketNotFound):
		if _, err := js.CreateObjectStore(ctx, want); err != nil {
			ch.Action, ch.Err = Failed, fmt.Errorf("create object store: %w", err)
			return ch
		}
		ch.Action = Created
	default:
		ch.Action, ch.Err = Failed, err
	}
	return ch
}
