package policy

import (
	"time"

	"maintsignals/shared/domain"
)

// Conflict says why the policy p, in force since since (its revision's stored time), conflicts
// with the window the record r announced, "" when it does not. A policy that changes under an
// announced window leaves the record as it is (the signal stays true to what was announced);
// the conflict is what the notices function tells and the emitter counts. There is one when
// r is Pending with a window that has not ended at now, the revision was stored after the
// command that announced the window (the announcement was judged by an earlier one, or forced
// past it), and p does not allow the window. A nil p (no policy covers the entity) has none.
func Conflict(r domain.Record, p *Policy, since, now time.Time) string {
	if p == nil || r.State != domain.StatePending || r.Window == nil || !now.Before(r.Window.End) {
		return ""
	}
	announced := r.LastCommandAt
	if announced.IsZero() {
		announced = r.UpdatedAt // records written before lastCommandAt
	}
	if !since.After(announced) {
		return ""
	}
	return p.Why(*r.Window)
}
