package command

import (
	"time"

	"maintsignals/shared/domain"
)

// Action is what the handler does with a command once it is decided.
type Action int

// Actions of a decision.
const (
	// Apply writes Decision.Next and then publishes Decision.Event.
	Apply Action = iota + 1
	// Reject, Duplicate and Republish publish Decision.Event and write nothing.
	Reject
	Duplicate
	Republish
	// Skip does nothing: the command already has its outcome.
	Skip
	// Reread decides again on a fresh read: the remembered record would not apply the command,
	// and only an applied outcome may be decided on a remembered record (its write checks it).
	Reread
)

var actionNames = [...]string{Apply: "apply", Reject: "reject", Duplicate: "duplicate", Republish: "republish", Skip: "skip", Reread: "reread"}

func (a Action) String() string { return actionNames[a] }

// Delivery is what the handler knows of one delivery of a stored command.
type Delivery struct {
	Seq      uint64    // sequence in MAINT_COMMANDS
	StoredAt time.Time // when the stream stored it: the command's time for every time-based rule
	// Remembered: the record is this replica's copy of its own last write, not a fresh read.
	Remembered bool
}

// Decision is the outcome of one command on one record.
type Decision struct {
	Action     Action
	Next       domain.Record     // Apply: the record to write
	Event      domain.Event      // Apply, Reject, Duplicate, Republish: the outcome to publish
	Transition domain.Transition // Apply
	Why        string            // for the log
}

// decide is every exactly-once rule of the command function, without I/O. Its inputs are the
// record, the command and facts of the stored message, never a replica's memory or clock: two
// replicas (one of them cut off and back) or two deliveries deciding the same command on the
// same record reach the same decision, and a record that moved on (a later command wrote it)
// makes any late decision a Skip. at only stamps the outcome.
func decide(rec domain.Record, cmd domain.Command, d Delivery, adm domain.Admission, at time.Time) Decision {
	dec := decideOn(rec, cmd, d, adm, at)
	if d.Remembered && dec.Action != Apply {
		return Decision{Action: Reread, Why: "remembered record would not apply it"}
	}
	dec.Event.CommandSeq = d.Seq
	return dec
}

func decideOn(rec domain.Record, cmd domain.Command, d Delivery, adm domain.Admission, at time.Time) Decision {
	switch {
	case appliedLast(rec, cmd.ID, d.Seq):
		// The write happened, the event may not have: the very same event again, under the
		// same id, so the events stream keeps one copy.
		return Decision{Action: Republish, Event: *rec.LastEvent, Why: "already applied; its outcome again"}
	case rec.HandledBefore(d.Seq, d.StoredAt):
		return Decision{Action: Skip, Why: "stored before the command the record holds: handled already"}
	case rec.Seen(cmd.ID):
		return Decision{Action: Duplicate, Event: domain.Duplicate(cmd, rec.State, at), Why: "id applied before"}
	}
	tokens, ok := adm.Admit(rec, d.StoredAt)
	if !ok {
		return Decision{Action: Reject, Event: domain.Rejected(cmd, rec.State, domain.TooMany(), at), Why: "over the entity's admission"}
	}
	next, tr, rej := domain.Apply(rec, cmd, at)
	if rej != nil {
		return Decision{Action: Reject, Event: domain.Rejected(cmd, rec.State, rej, at), Why: "not allowed"}
	}
	ev := domain.Applied(cmd, tr, at)
	ev.CommandSeq = d.Seq
	next.LastCommandID, next.LastCommandSeq, next.LastCommandAt = cmd.ID, d.Seq, d.StoredAt
	next.Remember(cmd.ID)
	next.LastEvent = &ev
	if adm.Rate > 0 {
		next.AdmitTokens, next.AdmitAt = tokens, later(d.StoredAt, rec.AdmitAt)
	}
	return Decision{Action: Apply, Next: next, Event: ev, Transition: tr, Why: "applied"}
}

// appliedLast reports whether the record was last written by this very stored command.
func appliedLast(rec domain.Record, commandID string, seq uint64) bool {
	return rec.LastCommandSeq == seq && rec.LastCommandID == commandID && rec.LastEvent != nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
