package domain

import (
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

	// SignedUpTo holds, per signing key, the issuedAt of the last signed command applied with
	// it: a signed command issued no later is a replay. Keys whose last command is older than
	// any command still accepted are dropped, so it stays as small as the set of keys in use.
	SignedUpTo map[string]time.Time `json:"signedUpTo,omitempty"`
}

// Follows reports whether next, a record about to replace r, was written by a command stored
// after the one that wrote r: a later stream sequence, or a later stored time (the commands
// stream was recreated and counts from 1 again). A record never moves backwards.
func (r Record) Follows(prev Record) bool {
	return r.LastCommandSeq > prev.LastCommandSeq || r.LastCommandAt.After(prev.LastCommandAt)
}

// HandledBefore reports whether the command stored at seq and storedAt was handled before the
// command that last wrote r: commands of an entity are handled in stream order, so one stored
// earlier than the last applied one already has its outcome.
func (r Record) HandledBefore(seq uint64, storedAt time.Time) bool {
	return seq < r.LastCommandSeq && !storedAt.After(r.LastCommandAt)
}

// Seen reports whether the record remembers applying command id.
func (r Record) Seen(id string) bool {
	for _, v := range r.RecentCommandIDs {
		if v == id {
			return true
		}
	}
	return false
}

// Remember records an applied command id, keeping the newest RecentIDs.
func (r *Record) Remember(id string) {
	// Full slice expression: a copy of a record must never write into another copy's array.
	n := len(r.RecentCommandIDs)
	ids := append(r.RecentCommandIDs[:n:n], id)
	if len(ids) > RecentIDs {
		ids = append([]string(nil), ids[len(ids)-RecentIDs:]...)
	}
	r.RecentCommandIDs = ids
}

// EncodeRecord marshals a record for the bucket.
func EncodeRecord(r Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return b, nil
}

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

// Overdue reports whether the entity is still Pending after its announced window ended.
func (r Record) Overdue(now time.Time) bool {
	return r.State == StatePending && r.Window != nil && !now.Before(r.Window.End)
}

// Stuck reports whether an update has been in progress for longer than limit.
func (r Record) Stuck(now time.Time, limit time.Duration) bool {
	return r.Updating && !r.UpdatedAt.IsZero() && now.Sub(r.UpdatedAt) > limit
}
