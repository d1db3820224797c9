package domain

import (
	"fmt"
	"strings"
	"time"
)

// Names of the messaging contract (README, Messaging contract).
const (
	CommandsStream = "MAINT_COMMANDS"
	EventsStream   = "MAINT_EVENTS"
	ScheduleStream = "MAINT_SCHEDULE"
	DLQStream      = "MAINT_DLQ"
	Bucket         = "maintenance"

	CommandPrefix   = "maint.cmd."
	EventPrefix     = "maint.evt."
	DLQPrefix       = "maint.dlq."
	ScheduleSubject = "maint.schedule.emit"
	TickSubject     = "maint.tick.emit"

	// HeaderMsgID is the JetStream de-duplication header; commands carry their id in it.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderFirstStored is the time (RFC 3339) a message moved by `maintctl provision` into
	// the store's layout was first stored: a policy revision stays in force from then.
	HeaderFirstStored = "Maint-First-Stored"
)

// Names of the customers' maintenance policies (README, customers' maintenance policies).
const (
	// PoliciesStream holds the policy commands, retained like commands (audit, replay).
	PoliciesStream = "MAINT_POLICIES"
	// PoliciesBucket holds the policy in force of each scope, under the scope's located key, with
	// the history the command function judges stored commands by.
	PoliciesBucket = "maintenance-policies"
	// PolicyPrefix + <scope key> is where policy commands are published.
	PolicyPrefix = "maint.policy."
	// PolicyEventPrefix + <scope key> is where their outcome events go, in EventsStream: one
	// token more than an entity's events (maint.evt.<key>), so that the readers of entities'
	// events (maint.evt.*) never see them.
	PolicyEventPrefix = EventPrefix + "policy."
	// PoliciesConsumer is the policies function's durable consumer of PoliciesStream, and
	// PoliciesPriorityGroup the group it pulls in (pinned to one replica at a time).
	PoliciesConsumer      = "policies"
	PoliciesPriorityGroup = "policies"
	// PoliciesHistory is how many revisions of a scope's policy the bucket keeps (the most a
	// JetStream bucket keeps): a command is judged by the revision of its stored time while
	// the scope's policy changed fewer times since.
	PoliciesHistory = 64
)

// PolicyCommandSubject is where policy commands for the scope of key are published.
func PolicyCommandSubject(key string) string { return PolicyPrefix + key }

// PolicyEventSubject is where the outcome events of the policy commands of key go.
func PolicyEventSubject(key string) string { return PolicyEventPrefix + key }

// PolicySubject is the subject of the scope key's policy in the bucket's stream, under its
// located key (<subscription>.<group>.<key>, see Located): the tenant tokens let the server
// confine a customer to the policies of its own scopes. PoliciesFilter is every policy's, and
// PoliciesBucketStream the bucket's stream.
func PolicySubject(key string) string { return PoliciesPrefix + PolicyKey(key) }

// PolicyKey is the key of the scope key's policy in PoliciesBucket.
func PolicyKey(key string) string { return Located(key) }

// PoliciesPrefix is what every policy's subject starts with.
const PoliciesPrefix = "$KV." + PoliciesBucket + "."

// PoliciesFilter matches every policy's subject.
const PoliciesFilter = PoliciesPrefix + ">"

// PoliciesBucketStream is the stream of PoliciesBucket.
const PoliciesBucketStream = "KV_" + PoliciesBucket

// The header by which a JetStream bucket marks a delete (the key's history kept) and a purge
// (its history dropped).
const (
	HeaderKVOperation = "KV-Operation"
	KVDelete          = "DEL"
	KVPurge           = "PURGE"
)

// CommandSubject is where commands for an entity key are published.
func CommandSubject(key string) string { return CommandPrefix + key }

// EventSubject is where outcome events for an entity key are published:
// maint.evt.<cell>.<subscription>.<group>.<key> (Layout), in its cell's events stream.
func EventSubject(key string) string { return EventPrefix + CellOf(key).String() + "." + Located(key) }

// DLQSubject is where dead letters for an entity key are kept.
func DLQSubject(key string) string { return DLQPrefix + key }

// KeyFromSubject returns the entity key of a command, event or dead-letter subject: its last
// token. Commands are stored as maint.cmd.<partition>.<key>, published as maint.cmd.<key>.
func KeyFromSubject(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// Durable consumers of the functions, and how the command partitions are served.
const (
	// EmitterConsumer and NoticesConsumer were the single tick consumers of the emitter and
	// the notices function before ticks were shared in shards; provisioning removes them, and
	// their names prefix the shard consumers (EmitterShardConsumer, NoticesShardConsumer).
	EmitterConsumer = "emitter"
	NoticesConsumer = "notices"
	// CommandConsumerPrefix names the partition consumers: command-p0, command-p1, ...
	CommandConsumerPrefix = "command-p"
	// CommandPriorityGroup is the priority group the command function pulls with: each
	// partition is pinned to one replica at a time (pinned_client).
	CommandPriorityGroup = "command"
)

// CommandConsumer is the durable consumer of command partition p.
func CommandConsumer(p int) string { return fmt.Sprintf("%s%d", CommandConsumerPrefix, p) }

// CommandFilter is the subject filter of command partition p: commands are stored as
// maint.cmd.<p>.<key> by the stream's subject transform (CommandPartitionTransform).
func CommandFilter(p int) string { return fmt.Sprintf("%s%d.*", CommandPrefix, p) }

// CommandPartitionTransform maps maint.cmd.<key> to maint.cmd.<partition>.<key>, a hash of the
// key over n partitions: one entity's commands always land in one partition.
func CommandPartitionTransform(n int) string {
	return fmt.Sprintf("%s{{partition(%d,1)}}.{{wildcard(1)}}", CommandPrefix, n)
}

// PinnedTTL is how long a partition stays pinned to a replica that stopped renewing its pulls:
// the ack wait, but at least 3 s, so that a live replica (which pulls again at least every
// second) never loses it between pulls.
func PinnedTTL(ackWait time.Duration) time.Duration { return max(ackWait, 3*time.Second) }

// HighCardinalityThreshold is nats-server's limit (highCardinalityThreshold in
// server/filestore.go) past which a stream holding more subjects, or more interior deletes,
// no longer writes its index periodically: after a crash it rebuilds its state by reading
// every message block. No stream of the product is meant to come near it (README, A year at a
// million entities).
const HighCardinalityThreshold = 1_000_000

// Streams lists every stream the product provisions (the buckets' and the object store's
// included), for the operators' view of their size (cluster.maintenance.stream.*). Optional
// ones (campaigns, webhooks) may be absent.
func Streams() []string {
	out := []string{CommandsStream, EventsStream, DLQStream, ScheduleStream, PoliciesStream}
	for _, c := range AllCells() {
		out = append(out, c.RecordsStream(), c.EventsStream(), c.NoticesStream())
	}
	return append(out, PoliciesBucketStream,
		CampaignsStream, "KV_"+CampaignsBucket, "KV_"+CampaignEntitiesBucket, "OBJ_"+CampaignListsBucket,
		WebhookStream, SubscriptionsStream, SubscriptionEventsStream, SubscriptionsBucketStream, SubscriptionSecretsStream)
}
