package domain

import (
	"fmt"
	"time"
)

// Ledger is what a stored value remembers of the commands that wrote it, so that each command
// takes effect once: the last one applied (its id, its sequence and stored time in its
// stream), the ids of the last RecentIDs applied, and the signed ones of late (see
// Record.SignedIDs). A record keeps these fields itself (Record); a policy revision carries its
// ledger beside the policy.
type Ledger struct {
	LastCommandID    string    `json:"lastCommandId"`
	LastCommandSeq   uint64    `json:"lastCommandSeq"`
	LastCommandAt    time.Time `json:"lastCommandAt,omitzero"`
	RecentCommandIDs []string  `json:"recentCommandIds,omitempty"`
	SignedIDs        SignedIDs `json:"signedIds,omitempty"`
	SignedForgotten  time.Time `json:"signedForgotten,omitzero"`
}

// HandledBefore reports whether the command stored at seq and storedAt was handled before the
// last one applied: the commands of a key are handled in stream order.
func (l Ledger) HandledBefore(seq uint64, storedAt time.Time) bool {
	return seq < l.LastCommandSeq && !storedAt.After(l.LastCommandAt)
}

// Seen reports whether command id was applied: among the last applied or the signed ones
// remembered.
func (l Ledger) Seen(id string) bool {
	for _, v := range l.RecentCommandIDs {
		if v == id {
			return true
		}
	}
	for _, s := range l.SignedIDs {
		if s.ID == id {
			return true
		}
	}
	return false
}

// Remember records an applied command id, keeping the newest RecentIDs.
func (l *Ledger) Remember(id string) {
	// Full slice expression: a copy must never write into another copy's array.
	n := len(l.RecentCommandIDs)
	ids := append(l.RecentCommandIDs[:n:n], id)
	if len(ids) > RecentIDs {
		ids = append([]string(nil), ids[len(ids)-RecentIDs:]...)
	}
	l.RecentCommandIDs = ids
}

// RememberSigned records an applied signed command, forgetting the signed commands issued
// before horizon (no command issued then is accepted any more) and, beyond MaxSignedIDs, the
// oldest issued; forgetting one raises SignedForgotten to its issuedAt. An empty id only
// forgets.
func (l *Ledger) RememberSigned(id string, issued, horizon time.Time) {
	if id == "" && len(l.SignedIDs) == 0 {
		return
	}
	kept := make(SignedIDs, 0, min(len(l.SignedIDs)+1, MaxSignedIDs+1))
	for _, s := range l.SignedIDs {
		if s.IssuedAt.Before(horizon) {
			l.forget(s)
			continue
		}
		kept = append(kept, s)
	}
	if id != "" {
		kept = append(kept, SignedID{ID: id, IssuedAt: issued.UTC()})
	}
	if len(kept) > MaxSignedIDs {
		oldest := 0
		for i, s := range kept {
			if s.IssuedAt.Before(kept[oldest].IssuedAt) {
				oldest = i
			}
		}
		l.forget(kept[oldest])
		kept = append(kept[:oldest], kept[oldest+1:]...)
	}
	l.SignedIDs = kept
	if len(kept) == 0 {
		l.SignedIDs = nil
	}
}

func (l *Ledger) forget(s SignedID) {
	if s.IssuedAt.After(l.SignedForgotten) {
		l.SignedForgotten = s.IssuedAt
	}
}

// MaxFutureSkew is how far ahead of the stream's clock a signed command's issuedAt may be.
const MaxFutureSkew = time.Minute

// SignedHorizon is the issuedAt before which no signed command stored at storedAt is accepted
// (older than maxAge); the skew keeps a stream clock that steps back a little on the safe side.
func SignedHorizon(storedAt time.Time, maxAge time.Duration) time.Time {
	return storedAt.Add(-maxAge - MaxFutureSkew)
}

// CheckSigned is the rule of signed commands (README, security): a signed command issued at
// issuedAt (RFC 3339, inside the signed body) and stored at storedAt is refused, Unauthorized,
// when it is older than maxAge or more than MaxFutureSkew ahead of the stream's clock, or when
// it was issued no later than forgotten, the newest signed command its key no longer
// remembers (it could be a replay of that one). A replay of one remembered is a duplicate.
func CheckSigned(issuedAt string, storedAt time.Time, maxAge time.Duration, forgotten time.Time) *Rejection {
	issued, err := time.Parse(time.RFC3339Nano, issuedAt)
	switch {
	case err != nil:
		return unauthorized("expired: a signed command must carry issuedAt inside the signed body")
	case storedAt.Sub(issued) > maxAge:
		return unauthorized("expired: issued at %s, more than %s before it was stored at %s", issuedAt, maxAge, storedAt.UTC().Format(time.RFC3339))
	case issued.Sub(storedAt) > MaxFutureSkew:
		return unauthorized("expired: issued at %s, more than %s ahead of the stream's clock (%s)", issuedAt, MaxFutureSkew, storedAt.UTC().Format(time.RFC3339))
	case !issued.After(forgotten):
		return unauthorized("expired: issued at %s, no later than %s, the newest signed command this entity no longer remembers (it remembers at most %d within the command age); sign a new command",
			issuedAt, forgotten.UTC().Format(time.RFC3339Nano), MaxSignedIDs)
	}
	return nil
}

func unauthorized(format string, args ...any) *Rejection {
	return &Rejection{Code: CodeUnauthorized, Message: fmt.Sprintf(format, args...)}
}

// Applied records the command applied at seq of its stream, stored at storedAt, as the last:
// its id remembered and, when signed, remembered with its issuedAt until no command issued
// then is accepted (maxAge after storedAt).
func (l *Ledger) Applied(id string, seq uint64, storedAt time.Time, signed bool, issued time.Time, maxAge time.Duration) {
	l.LastCommandID, l.LastCommandSeq, l.LastCommandAt = id, seq, storedAt
	l.Remember(id)
	signedID := ""
	if signed {
		signedID = id
	}
	l.RememberSigned(signedID, issued, SignedHorizon(storedAt, maxAge))
}
