package domain

// The webhook function's stream (SPEC §7): dead-lettered deliveries go to MAINT_DLQ like
// dead-lettered commands (one list, one replay verb), marked with the subscription; a replay
// comes back to the function through this stream, on the subscription's own subject.
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

// WebhookConsumer is the durable consumer of a subscription, on every stream it reads.
func WebhookConsumer(sub string) string { return WebhookConsumerPrefix + sub }
