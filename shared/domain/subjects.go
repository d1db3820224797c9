package domain

import "strings"

// Names of the messaging contract (SPEC §3).
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
