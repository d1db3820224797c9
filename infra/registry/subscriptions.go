package registry

import (
	"github.com/spf13/pflag"

	"maintsignals/functions/subscriptions"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
)

// subscriptionsFunction applies the self-service webhook subscription commands (README,
// Tenants); the webhook function follows the bucket it writes.
func subscriptionsFunction() Function {
	return Function{
		Name:      "subscriptions",
		About:     "applies subscription commands: self-service webhook subscriptions created and deleted (MAINT_SUBSCRIPTIONS)",
		Role:      roleFunction,
		Drain:     function.DefaultDrainTimeout,
		Consumers: subscriptionsConsumers,
		Serves:    []Serve{{Stream: domain.SubscriptionsStream, Consumer: domain.SubscriptionsConsumer, Pinned: true}},
		Access: Access{
			// It writes the records and the secrets (compare-and-swaps on the subjects' last
			// sequences) and publishes the outcomes and dead letters.
			Publish: []string{domain.SubscriptionEventPrefix + ">", domain.DLQPrefix + "*",
				domain.SubscriptionSubject(">"), domain.SubscriptionSecretSubject(">")},
			// It reads a name's last revision with its header, its secret's last sequence and,
			// for a redelivered command, the name's last outcome.
			Get: []string{domain.SubscriptionsBucketStream, domain.SubscriptionSecretsStream, domain.SubscriptionEventsStream},
		},
		Flags: subscriptionsFlags,
	}
}

// subscriptionsConsumers is the subscriptions function's one consumer: pinned to one replica
// at a time, names in stream order, as the policies function's.
func subscriptionsConsumers(t Topology) []Consumer {
	return pinnedCommandConsumer(t, domain.SubscriptionsStream, domain.SubscriptionsConsumer, domain.SubscriptionsPriorityGroup,
		domain.SubscriptionCommandPrefix+">", "subscriptions function: subscription commands, by located name in stream order")
}

func subscriptionsFlags(fs *pflag.FlagSet) Instance {
	return applierFlags(fs, func(w *signing.Watched) subscriptions.Authority { return w }, subscriptions.Run)
}
