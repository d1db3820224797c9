package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// RecordVersion is the schema version written in every record.
const RecordVersion = 1

// RecentIDs is how many applied command ids a record remembers, so that a command published
// again after the stream's duplicate window is still recognised as a duplicate.
const RecentIDs = 32

// Record is the current state of one entity: the value of its key in the KV bucket.
// Readers ignore fields they do not know.
type Record struct {
	ResourceID     string    `json:"resourceId"`
	State          State     `json:"state"`
	Updating       bool      `json:"updating"`
	Task           Task      `json:"task"`
	LastError      string    `json:"lastError"`
	Window         *Window   `json:"window,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	StateSince     time.Time `json:"stateSince"`
	UpdatedAt      time.Time `json:"updatedAt"`
	LastCommandID  string    `json:"lastCommandId"`
	LastCommandSeq uint64    `json:"lastCommandSeq"`
	Version        int       `json:"version"`

	// Campaign names the campaign whose announcement the window is, while it is (see
	// CampaignRef); a later Pending or a return to None drops it.
	Campaign *CampaignRef `json:"campaign,omitempty"`

	// ForgottenAt, when set, is when a Forget took the entity out of the signal: the record is
	// then a tombstone that no reader lists, emits or notifies about. It keeps what the
	// command function needs to recognise the commands handled before (the fields below), so
	// that a late copy of one of them changes nothing; the next command applied starts the
	// entity afresh (asNew).
	ForgottenAt time.Time `json:"forgottenAt,omitzero"`

	// LastCommandAt is when the commands stream stored the last applied command: with its
	// sequence, it tells a stale redelivery from a command of a recreated stream.
	LastCommandAt time.Time `json:"lastCommandAt,omitzero"`

	// RecentCommandIDs are the ids of the last applied commands, newest last.
	RecentCommandIDs []string `json:"recentCommandIds,omitempty"`
	// LastEvent is the outcome event of the last applied command, so that a redelivery after
	// a crash between the write and the event publishes the very same event.
	LastEvent *Event `json:"lastEvent,omitempty"`

	// AdmitTokens and AdmitAt are the entity's admission bucket (see Admission) as of the
	// stored time of the last applied command: kept in the record, so that every replica
	// admits or refuses a command alike.
	AdmitTokens float64   `json:"admitTokens,omitempty"`
	AdmitAt     time.Time `json:"admitAt,omitzero"`

	// SignedIDs are the signed commands applied lately, in the order they were applied: every
	// signed command applied with an issuedAt after SignedForgotten is here, so a replay of
	// one (the same id again) is recognised however long after and under whatever header.
	// An entry is forgotten once it is past any command's age, or when the record holds
	// MaxSignedIDs and a newer one comes; forgetting one raises SignedForgotten to its issuedAt.
	SignedIDs SignedIDs `json:"signedIds,omitempty"`
	// SignedForgotten is the issuedAt of the newest signed command forgotten: a signed command
	// issued no later cannot be told from a replay and is refused.
	SignedForgotten time.Time `json:"signedForgotten,omitzero"`

	// SignedUpTo is the replay memory of records written before SignedIDs: per signing key, the
	// issuedAt of the last signed command applied with it. It is read as a SignedForgotten (a
	// signed command issued no later is refused) and dropped on the record's next write.
	SignedUpTo map[string]time.Time `json:"signedUpTo,omitempty"`

	// Fence is the refusal of the last command handled, when that command was refused on a
	// redelivery (see Fence); the next command applied drops it.
	Fence *Fence `json:"fence,omitempty"`
}

// Fence is the outcome of a command refused on a redelivery, written into the record before
// it is published. Another replica may have taken the same command earlier and been cut off
// while committing it: it decided on the revision before the fence, so its compare-and-swap
// fails, it reads again and finds the command refused. So no command is both refused in its
// outcome and written to the record (SPEC §13), whichever replica's write reaches the bucket.
type Fence struct {
	// StoredAt is when the commands stream stored the refused command (with Event.CommandSeq,
	// where it stands in the entity's order).
	StoredAt time.Time `json:"storedAt"`
	// Event is the outcome (rejected or dead_lettered), published again as it is when the
	// command comes back.
	Event Event `json:"event"`
}

// Fenced reports whether the record holds the fence of command id stored at seq: its refusal
// is decided, and only its outcome may still have to be published.
func (r Record) Fenced(id string, seq uint64) bool {
	return r.Fence != nil && r.Fence.Event.CommandSeq == seq && r.Fence.Event.CommandID == id
}

// FenceRefusal is the record that fences the refusal ev of the command stored at storedAt. An
// entity without a record gets a tombstone (Forgotten), so that the fence does not make it
// tracked: no reader lists, emits or notifies about it, and its next applied command starts it
// afresh.
func (r Record) FenceRefusal(ev Event, storedAt time.Time) Record {
	if r.UpdatedAt.IsZero() && !r.Forgotten() {
		r.ResourceID, r.State, r.ForgottenAt = ev.ResourceID, StateNone, storedAt
	}
	r.Fence = &Fence{StoredAt: storedAt, Event: ev}
	return r
}

// FenceOnly reports whether the record holds nothing but a refusal's fence (FenceRefusal on an
// entity without a record): no command was ever applied to the entity, and every reader shows
// it as never seen.
func (r Record) FenceOnly() bool { return r.Fence != nil && r.UpdatedAt.IsZero() }

// handledLast is the stream sequence and stored time of the last command the record holds the
// outcome of: its fence's when it has one (a fence always follows the last applied command).
func (r Record) handledLast() (uint64, time.Time) {
	if r.Fence != nil {
		return r.Fence.Event.CommandSeq, r.Fence.StoredAt
	}
	return r.LastCommandSeq, r.LastCommandAt
}

// Forgotten reports whether the record is a Forget's tombstone: the entity is not tracked.
func (r Record) Forgotten() bool { return !r.ForgottenAt.IsZero() }

// asNew is the record a command applied after a Forget starts from: an entity never seen, as
// far as its maintenance goes; what the command handler keeps of the commands it handled (ids,
// sequences, admission, signatures) stays.
func (r Record) asNew() Record {
	r.ResourceID, r.State, r.Updating, r.Task, r.LastError = "", StateNone, false, "", ""
	r.Window, r.Reason, r.Campaign = nil, "", nil
	r.StateSince, r.UpdatedAt, r.ForgottenAt = time.Time{}, time.Time{}, time.Time{}
	return r
}

// Follows reports whether next, a record about to replace r, was written by a command stored
// after the one that wrote r: a later stream sequence, or a later stored time (the commands
// stream was recreated and counts from 1 again). A record never moves backwards.
func (r Record) Follows(prev Record) bool {
	seq, at := r.handledLast()
	prevSeq, prevAt := prev.handledLast()
	return seq > prevSeq || at.After(prevAt)
}

// ledger is the record's fields of the commands that wrote it.
func (r Record) ledger() Ledger {
	return Ledger{LastCommandID: r.LastCommandID, LastCommandSeq: r.LastCommandSeq, LastCommandAt: r.LastCommandAt,
		RecentCommandIDs: r.RecentCommandIDs, SignedIDs: r.SignedIDs, SignedForgotten: r.SignedForgottenUpTo()}
}

// HandledBefore reports whether the command stored at seq and storedAt was handled before the
// command that last wrote r (applied, or refused behind a fence): commands of an entity are
// handled in stream order, so one stored earlier already has its outcome.
func (r Record) HandledBefore(seq uint64, storedAt time.Time) bool {
	l := r.ledger()
	l.LastCommandSeq, l.LastCommandAt = r.handledLast()
	return l.HandledBefore(seq, storedAt)
}

// Seen reports whether the record remembers applying command id: among the last applied, or
// among the signed ones it remembers.
func (r Record) Seen(id string) bool { return r.ledger().Seen(id) }

// Remember records an applied command id, keeping the newest RecentIDs.
func (r *Record) Remember(id string) {
	l := r.ledger()
	l.Remember(id)
	r.RecentCommandIDs = l.RecentCommandIDs
}

// MaxSignedIDs is how many signed commands a record remembers at most. It is more than an
// entity's default admission burst (200), so a whole burst signed within one second is
// applied; past it, the oldest issued is forgotten (see Record.SignedIDs).
const MaxSignedIDs = 256

// SignedID is a signed command a record remembers.
type SignedID struct {
	ID       string
	IssuedAt time.Time
}

// SignedIDs are written as one string, "id@issuedAt id@issuedAt …" (ids hold no space or @):
// a record can hold hundreds, and JSON objects of them cost more to read and write than the
// rest of the command's handling.
type SignedIDs []SignedID

// MarshalText writes the string form.
func (s SignedIDs) MarshalText() ([]byte, error) {
	b := make([]byte, 0, len(s)*48)
	for i, v := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, v.ID...)
		b = append(b, '@')
		b = v.IssuedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	return b, nil
}

// UnmarshalText reads the string form.
func (s *SignedIDs) UnmarshalText(b []byte) error {
	out := make(SignedIDs, 0, bytes.Count(b, []byte{'@'}))
	for f := range bytes.SplitSeq(b, []byte{' '}) {
		if len(f) == 0 {
			continue
		}
		id, at, ok := bytes.Cut(f, []byte{'@'})
		t, err := time.Parse(time.RFC3339Nano, string(at))
		if !ok || err != nil || len(id) == 0 {
			return fmt.Errorf("signed ids: %q is not id@issuedAt", f)
		}
		out = append(out, SignedID{ID: string(id), IssuedAt: t})
	}
	*s = out
	return nil
}

// SignedForgottenUpTo is the issuedAt up to which the record no longer tells a signed command
// from a replay: SignedForgotten, or a later time of the per-key memory it replaced.
func (r Record) SignedForgottenUpTo() time.Time {
	t := r.SignedForgotten
	for _, v := range r.SignedUpTo {
		if v.After(t) {
			t = v
		}
	}
	return t
}

// RememberSigned records an applied signed command, forgetting the signed commands issued
// before horizon (no command issued then is accepted any more) and, beyond MaxSignedIDs, the
// oldest issued (Ledger.RememberSigned); the per-key memory of older records is folded into
// SignedForgotten. An empty id only forgets.
func (r *Record) RememberSigned(id string, issued, horizon time.Time) {
	if id == "" && len(r.SignedIDs) == 0 && r.SignedUpTo == nil {
		return
	}
	l := r.ledger()
	l.RememberSigned(id, issued, horizon)
	r.SignedIDs, r.SignedForgotten, r.SignedUpTo = l.SignedIDs, l.SignedForgotten, nil
}

// EncodeRecord marshals a record for the bucket.
func EncodeRecord(r Record) ([]byte, error) { return encodeJSON("record", r) }

// DecodeRecord unmarshals a record from the bucket.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("decode record: %w", err)
	}
	if r.State == "" {
		r.State = StateNone
	}
	return r, nil
}

// DefaultStuckAfter is how long an update may run before it counts as stuck (README, Time in the signal).
const DefaultStuckAfter = 6 * time.Hour

// The facts below are the one definition of overdue and stuck (README, One definition of every
// fleet fact): the CLI, the web view, the fleet gauges, the notices and the campaign planner
// all call them. Each also says from when it holds, so that a reader that keeps the fleet in
// memory (the web view) can order entities by that time and count them at any now.

// Ended reports whether the window has ended at now: its end is now or earlier.
func (w Window) Ended(now time.Time) bool { return !now.Before(w.End) }

// Overdue reports whether the entity is still Pending after its announced window ended.
func (r Record) Overdue(now time.Time) bool {
	from, ok := r.OverdueFrom()
	return ok && !now.Before(from)
}

// OverdueFrom is the first instant at which Overdue holds for the record as it stands (its
// window's end); false when it never does (not Pending, or no window).
func (r Record) OverdueFrom() (time.Time, bool) {
	if r.State != StatePending || r.Window == nil {
		return time.Time{}, false
	}
	return r.Window.End, true
}

// Stuck reports whether an update has been in progress for longer than limit.
func (r Record) Stuck(now time.Time, limit time.Duration) bool {
	from, ok := r.StuckFrom(limit)
	return ok && !now.Before(from)
}

// StuckFrom is the first instant at which Stuck holds for the record as it stands: one
// nanosecond past limit after the update started (it must run longer than limit); false when
// no update is in progress, or its start is unknown.
func (r Record) StuckFrom(limit time.Duration) (time.Time, bool) {
	if !r.Updating || r.UpdatedAt.IsZero() {
		return time.Time{}, false
	}
	return r.UpdatedAt.Add(limit + time.Nanosecond), true
}
