package domain

// The webhook function's stream (README, Integrating). It sources the events (and the notices, where that
// stream exists) and takes the replays of dead-lettered deliveries, on the subscription's own
// subject; each subscription's durable consumer lives here, so that no role but the functions
// can reach it (the events stream lets readers create consumers, which could otherwise move or
// delete a subscription's progress). Dead-lettered deliveries go to MAINT_DLQ like
// dead-lettered commands (one list, one replay verb), marked with the subscription.
const (
	WebhookStream         = "MAINT_WEBHOOK"
	WebhookReplayPrefix   = "maint.webhook.replay."
	WebhookConsumerPrefix = "webhook-"

	// HeaderWebhookSubscription names, on a dead letter, the subscription whose delivery failed.
	HeaderWebhookSubscription = "Maint-Webhook-Subscription"
)

// WebhookReplaySubject is where a dead-lettered delivery of subscription sub for entity key is
// sent again.
func WebhookReplaySubject(sub, key string) string { return WebhookReplayPrefix + sub + "." + key }

// WebhookConsumer is the durable consumer of a subscription (on WebhookStream).
func WebhookConsumer(sub string) string { return WebhookConsumerPrefix + sub }
