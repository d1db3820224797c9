package provision

import (
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Self-service webhook subscriptions (README, Tenants): their commands' stream, their
// outcomes' stream, and the two buckets of the subscriptions in force and of their secrets.
// They are provisioned whether webhooks are delivered or not (a few messages each); the
// subscriptions function's consumer is its registry entry's.

// subscriptionStreams are MAINT_SUBSCRIPTIONS (the commands, which carry the secrets: retained
// like commands, read by the functions alone) and MAINT_SUBSCRIPTION_EVENTS (their outcomes,
// kept as long as the outcome events, read by admins and, each its own, by customers).
func subscriptionStreams(c Config) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        domain.SubscriptionsStream,
			Description: "Self-service webhook subscription commands: create, delete (audit, replay)",
			Subjects:    []string{domain.SubscriptionCommandPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.CommandsMaxAge,
			Duplicates:  c.DuplicateWindow,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
		{
			Name:        domain.SubscriptionEventsStream,
			Description: "Self-service webhook subscription commands' outcome events, one per command",
			Subjects:    []string{domain.SubscriptionEventPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.EventsMaxAge,
			Duplicates:  c.DuplicateWindow,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
	}
}

// SubscriptionBuckets are the subscriptions in force (without their secrets) and their
// secrets, both under the located name <sub>.<group>.<name>, one revision each: a delete
// replaces the secret it drops.
func SubscriptionBuckets(c Config) []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: domain.SubscriptionsBucket, Description: "Self-service webhook subscriptions in force, by tenant and name", History: 1, Storage: c.Storage, Replicas: c.Replicas},
		{Bucket: domain.SubscriptionSecretsBucket, Description: "Self-service webhook subscriptions' signing secrets, for the webhook function", History: 1, Storage: c.Storage, Replicas: c.Replicas},
	}
}
