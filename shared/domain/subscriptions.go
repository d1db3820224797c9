package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Names of the self-service webhook subscriptions (README, Tenants): subscriptions that
// customers and admins create and delete with signed commands, beside the operator's
// --subscriptions file.
//
// Every subject and bucket key of a subscription carries its tenant tokens ahead of its name,
// <subscription>.<resource group>.<name> (the located name, SubscriptionKey), so that NATS
// permissions confine a customer to its own with whole-token wildcards (Scope.Tokens).
const (
	// SubscriptionsStream holds the subscription commands, retained like commands (audit,
	// replay). They carry the signing secret of a new subscription: only the functions and
	// the operator read this stream.
	SubscriptionsStream = "MAINT_SUBSCRIPTIONS"
	// SubscriptionEventsStream holds the outcome event of each subscription command (never a
	// secret): a customer reads those of its own tenants, an admin every one.
	SubscriptionEventsStream = "MAINT_SUBSCRIPTION_EVENTS"
	// SubscriptionsBucket holds each subscription in force, under its located name, without
	// its secret; SubscriptionSecretsBucket holds the secret, under the same key, for the
	// webhook function alone.
	SubscriptionsBucket       = "maintenance-subscriptions"
	SubscriptionSecretsBucket = "maintenance-subscription-secrets"
	SubscriptionsBucketStream = "KV_" + SubscriptionsBucket
	SubscriptionSecretsStream = "KV_" + SubscriptionSecretsBucket

	// SubscriptionCommandPrefix + <located name> is where subscription commands are
	// published; SubscriptionEventPrefix + <located name> where their outcomes go.
	SubscriptionCommandPrefix = "maint.subscription.cmd."
	SubscriptionEventPrefix   = "maint.subscription.evt."

	// SubscriptionsConsumer is the subscriptions function's durable consumer of
	// SubscriptionsStream, pulled in SubscriptionsPriorityGroup (pinned to one replica).
	SubscriptionsConsumer      = "subscriptions"
	SubscriptionsPriorityGroup = "subscriptions"

	// HeaderSubscriptionMeta is the header of a subscription's revision in the bucket: its
	// SubscriptionMeta, as JSON (the value stays the subscription alone).
	HeaderSubscriptionMeta = "Maint-Subscription"
	// HeaderSubscriptionCommand is the header of a secret in SubscriptionSecretsBucket: the id
	// of the create command it came with, which the subscription's record names too.
	HeaderSubscriptionCommand = "Maint-Subscription-Command"

	// SubscriptionDeliverySeparator joins a self-service subscription's name and the hash that
	// makes its delivery name unique; a file subscription's name cannot hold it.
	SubscriptionDeliverySeparator = "~"
)

// SubscriptionKey is the located name of subscription name of tenant t:
// <subscription>.<resource group>.<name>, the key of its record and secret and the tail of its
// subjects.
func SubscriptionKey(t Tenant, name string) string {
	return t.Subscription + "." + t.Group + "." + name
}

// SubscriptionKeyOf is the located name at the end of a subscription subject (its last three
// tokens); "" when the subject has fewer.
func SubscriptionKeyOf(subject string) string {
	toks := strings.Split(subject, ".")
	if len(toks) < 3 {
		return ""
	}
	return strings.Join(toks[len(toks)-3:], ".")
}

// SubscriptionCommandSubject and SubscriptionEventSubject are the subjects of the commands and
// outcomes of the subscription at located name key.
func SubscriptionCommandSubject(key string) string { return SubscriptionCommandPrefix + key }
func SubscriptionEventSubject(key string) string   { return SubscriptionEventPrefix + key }

// SubscriptionSubject and SubscriptionSecretSubject are the subjects of a subscription's record
// and secret in their buckets' streams.
func SubscriptionSubject(key string) string {
	return "$KV." + SubscriptionsBucket + "." + key
}
func SubscriptionSecretSubject(key string) string {
	return "$KV." + SubscriptionSecretsBucket + "." + key
}

// SubscriptionDLQSubject is where a dead-lettered subscription command goes: one token, the
// located name with its dots made separators (MAINT_DLQ's subjects are maint.dlq.<token>).
func SubscriptionDLQSubject(key string) string {
	return DLQSubject(strings.ReplaceAll(key, ".", SubscriptionDeliverySeparator))
}

// SubscriptionDelivery is the delivery name of the subscription at located name key created by
// command id, stored at seq: the name, then a hash of all three. It names the subscription's
// consumer of the webhook feed, its dead letters and its replays, so that one created again
// under the same name after a delete is a new subscription with progress of its own, and two
// tenants' subscriptions of one name never meet.
func SubscriptionDelivery(key, commandID string, seq uint64) string {
	name := key[strings.LastIndexByte(key, '.')+1:]
	sum := sha256.Sum256([]byte(key + "\n" + commandID + "\n" + strconv.FormatUint(seq, 10)))
	return name + SubscriptionDeliverySeparator + hex.EncodeToString(sum[:6])
}

// SubscriptionAction is what a subscription command does.
type SubscriptionAction string

// Subscription actions.
const (
	SubscriptionCreate SubscriptionAction = "create"
	SubscriptionDelete SubscriptionAction = "delete"
)

// SubscriptionEvent is the outcome event of a subscription command, published once per command
// on maint.subscription.evt.<located name> after the bucket is written. It never carries the
// secret, nor the endpoint (whose path or query may hold a token).
type SubscriptionEvent struct {
	CommandID string             `json:"commandId"`
	Name      string             `json:"name"`
	Scope     string             `json:"scope"`
	Action    SubscriptionAction `json:"action,omitempty"`
	Outcome   Outcome            `json:"outcome"`
	Code      Code               `json:"code"`
	Message   string             `json:"message"`
	Target    string             `json:"target"`
	// Delivery is the delivery name of a subscription created (its consumer, dead letters and
	// replays).
	Delivery string `json:"delivery,omitempty"`
	// Revision is the bucket revision the command wrote when applied, else the subscription's
	// revision as the command found it (0: none).
	Revision uint64    `json:"revision"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	// CommandSeq is the command's sequence in SubscriptionsStream.
	CommandSeq uint64 `json:"commandSeq,omitempty"`
}

// EncodeSubscriptionEvent marshals a subscription outcome event.
func EncodeSubscriptionEvent(e SubscriptionEvent) ([]byte, error) {
	return encodeJSON("subscription event", e)
}

// DecodeSubscriptionEvent unmarshals a subscription outcome event.
func DecodeSubscriptionEvent(b []byte) (SubscriptionEvent, error) {
	return decodeJSON[SubscriptionEvent]("subscription event", b)
}

// SubscriptionOutcomeCEType is the CloudEvents type of a subscription command's outcome.
func SubscriptionOutcomeCEType(o Outcome) string {
	return "io.maintsignals.subscription." + string(o)
}

// SubscriptionMeta is what a subscription's revision says of how it was written: the ledger of
// the subscription commands of its located name (exactly-once), the revision it replaced and
// who wrote it.
type SubscriptionMeta struct {
	Ledger
	Prev  uint64    `json:"prev,omitempty"`
	Actor string    `json:"actor,omitempty"`
	At    time.Time `json:"at,omitzero"`
}

// EncodeSubscriptionMeta marshals the header's value.
func EncodeSubscriptionMeta(m SubscriptionMeta) (string, error) {
	b, err := encodeJSON("subscription meta", m)
	return string(b), err
}

// DecodeSubscriptionMeta reads the header's value; an empty one is a revision without a
// ledger.
func DecodeSubscriptionMeta(s string) (SubscriptionMeta, error) {
	if s == "" {
		return SubscriptionMeta{}, nil
	}
	return decodeJSON[SubscriptionMeta]("subscription meta", []byte(s))
}

// Answers is the command the event answers: its id and its sequence in MAINT_SUBSCRIPTIONS.
func (e SubscriptionEvent) Answers() (id string, seq uint64) { return e.CommandID, e.CommandSeq }

// CloudEvent is the event's CloudEvents type and source, and its time.
func (e SubscriptionEvent) CloudEvent() (ceType, source string, at time.Time) {
	return SubscriptionOutcomeCEType(e.Outcome), e.Scope, e.At
}
