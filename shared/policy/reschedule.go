package policy

import (
	"time"

	"maintsignals/shared/domain"
)

// EC2's rules for moving an announced window, from the stored time of the Reschedule.
const (
	// RescheduleMinLead: the new window starts at least this long after the stored time.
	RescheduleMinLead = time.Hour
	// RescheduleFreeze: a window that starts within this of the stored time stays put.
	RescheduleFreeze = 5 * time.Minute
)

// Reschedule judges a Reschedule command c stored at storedAt against the entity's record r,
// the policy p in force (nil when none) and the deadline of the campaign that announced the
// window (zero when none), and returns the window to write. In the order of the README:
//   - window.start is required, and window.end, when given, after it (InvalidParameter);
//   - the entity is Pending with a window and not updating (RequestNotAllowed, "task");
//   - a policy covers it and allows rescheduling (RequestNotAllowed, "policy.allowReschedule");
//   - the new start is at least RescheduleMinLead after storedAt, and the current start more
//     than RescheduleFreeze after it (InvalidParameter, "window.start"); the notice in force
//     does not apply: the customer chose;
//   - the policy allows the new window (InvalidParameter, "window", naming the next start);
//   - it ends at or before the deadline (InvalidParameter, "window.end").
//
// Without window.end the window keeps its length. force changes nothing here.
func Reschedule(r domain.Record, c domain.Command, storedAt time.Time, p *Policy, deadline time.Time) (domain.Window, *domain.Rejection) {
	if c.Window == nil || c.Window.Start.IsZero() {
		return domain.Window{}, domain.InvalidParameter("window.start", "is required with %s", domain.TaskReschedule)
	}
	if !c.Window.End.IsZero() && !c.Window.End.After(c.Window.Start) {
		return domain.Window{}, domain.InvalidParameter("window.end", "must be after window.start")
	}
	if r.State != domain.StatePending || r.Window == nil || r.Updating {
		return domain.Window{}, &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "task",
			Message: "only an announced window can be rescheduled: the entity must be Pending with a window and not updating"}
	}
	if p == nil || !p.AllowReschedule() {
		return domain.Window{}, &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "policy.allowReschedule",
			Message: "no policy in force for this entity allows rescheduling"}
	}
	w := *c.Window
	if w.End.IsZero() {
		w.End = w.Start.Add(r.Window.End.Sub(r.Window.Start))
	}
	earliest := storedAt.Add(RescheduleMinLead)
	switch {
	case w.Start.Before(earliest):
		return domain.Window{}, domain.InvalidParameter("window.start", "the new window must start at least %s after the request (%s), at %s or later",
			RescheduleMinLead, storedAt.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339))
	case !r.Window.Start.After(storedAt.Add(RescheduleFreeze)):
		return domain.Window{}, domain.InvalidParameter("window.start", "the announced window starts at %s, within %s of the request: it can no longer be moved",
			r.Window.Start.UTC().Format(time.RFC3339), RescheduleFreeze)
	}
	if why := p.Why(w); why != "" {
		return domain.Window{}, p.windowRejection(w, why, w.Start)
	}
	if !deadline.IsZero() && w.End.After(deadline) {
		return domain.Window{}, domain.InvalidParameter("window.end", "the window must end by the campaign's deadline %s", deadline.UTC().Format(time.RFC3339))
	}
	return w, nil
}
