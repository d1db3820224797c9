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
	// PoliciesBucket holds the customers' maintenance policies, under their scope's key.
	PoliciesBucket = "maintenance-policies"

	CommandPrefix   = "maint.cmd."
	EventPrefix     = "maint.evt."
	DLQPrefix       = "maint.dlq."
	ScheduleSubject = "maint.schedule.emit"
	TickSubject     = "maint.tick.emit"

	// HeaderMsgID is the JetStream de-duplication header; commands carry their id in it.
	HeaderMsgID = "Nats-Msg-Id"
)

// CommandSubject is where commands for an entity key are published.
func CommandSubject(key string) string { return CommandPrefix + key }

// EventSubject is where outcome events for an entity key are published.
func EventSubject(key string) string { return EventPrefix + key }

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
