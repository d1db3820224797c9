package policy

import (
	"time"

	"maintsignals/shared/domain"
)

// Conflict says why the policy p, in force since since (its revision's stored time), conflicts
// with the window the record r announced, "" when it does not. It is the one definition of a
// conflict (README, One definition of every fleet fact): the notices function tells it, the
// emitter counts it, the web view and the CLI show it. A policy that changes under an announced
// window leaves the record as it is (the signal stays true to what was announced). There is one
// when r is Pending with a window that has not ended at now, the revision was stored after the
// command that announced the window (the announcement was judged by an earlier one, or forced
// past it), and p does not allow the window. A nil p (no policy covers the entity) has none.
func Conflict(r domain.Record, p *Policy, since, now time.Time) string {
	if r.Window != nil && r.Window.Ended(now) {
		return "" // checked first: it is cheaper than judging the window against the policy
	}
	why, _ := ConflictUntil(r, p, since)
	return why
}

// ConflictUntil is Conflict without a now: why p conflicts with r's window, and the instant
// the conflict stops holding (the window's end: an ended window conflicts with nothing). A
// reader that keeps the fleet in memory orders entities by it and counts them at any now.
func ConflictUntil(r domain.Record, p *Policy, since time.Time) (why string, until time.Time) {
	if p == nil || r.State != domain.StatePending || r.Window == nil {
		return "", time.Time{}
	}
	announced := r.LastCommandAt
	if announced.IsZero() {
		announced = r.UpdatedAt // records written before lastCommandAt
	}
	if !since.After(announced) {
		return "", time.Time{}
	}
	return p.Why(*r.Window), r.Window.End
}
