package policy

import (
	"fmt"
	"time"

	"maintsignals/shared/domain"
)

// OverridePolicy is the value of an outcome event's "override" when force let a command
// through that the policy in force refused.
const OverridePolicy = "policy"

// Decision is what the policy in force makes of a command.
type Decision struct {
	// Rejection refuses the command; nil lets it go on to the transition table.
	Rejection *domain.Rejection
	// Override is OverridePolicy when force bypassed a refusal of the policy, "" otherwise.
	Override string
}

// NoticeInForce is the larger of the policy's minimum notice and the command function's
// (--min-notice); p may be nil (no policy covers the entity).
func NoticeInForce(p *Policy, minNotice time.Duration) time.Duration {
	if p == nil {
		return minNotice
	}
	return max(p.minNotice, minNotice)
}

// Enforce applies the policy p in force when the command was stored (nil when none covers the
// entity) and the command function's minimum notice, in the order of the README:
//  1. a Pending whose window the policy does not allow: InvalidParameter on "window", naming
//     the next allowed start of a window of that length at or after both the requested start
//     and storedAt plus the notice in force;
//  2. a Pending whose window starts before storedAt plus the notice in force: InvalidParameter
//     on "window.start" (with no policy, the function's notice alone, as domain.CheckNotice);
//  3. an update task stored inside a blackout, or outside every allowed window:
//     RequestNotAllowed on "policy".
//
// With force, nothing is refused, and Override says whether a refusal of the policy was
// bypassed (a notice refusal counts when the policy's notice, not the function's, made it).
// Other tasks, and a Pending without a window, are never refused by a policy.
func Enforce(c domain.Command, storedAt time.Time, p *Policy, minNotice time.Duration) Decision {
	rej, byPolicy := refusal(c, storedAt, p, minNotice)
	switch {
	case rej == nil:
		return Decision{}
	case !c.Force:
		return Decision{Rejection: rej}
	case byPolicy:
		return Decision{Override: OverridePolicy}
	}
	return Decision{}
}

// refusal is the first check the command fails as if unforced, and whether the policy made it.
func refusal(c domain.Command, storedAt time.Time, p *Policy, minNotice time.Duration) (*domain.Rejection, bool) {
	c.Force = false
	notice := NoticeInForce(p, minNotice)
	switch {
	case c.Task == domain.TaskPending && c.Window != nil:
		if p != nil {
			if why := p.Why(*c.Window); why != "" {
				return p.windowRejection(*c.Window, why, later(c.Window.Start, storedAt.Add(notice))), true
			}
		}
		if rej := domain.CheckNotice(c, storedAt, notice); rej != nil {
			return rej, domain.CheckNotice(c, storedAt, minNotice) == nil
		}
	case c.Task.Kind() == domain.KindUpdate && p != nil:
		if rej := p.updateRejection(c.Task, storedAt); rej != nil {
			return rej, true
		}
	}
	return nil, false
}

// windowRejection refuses window w for the reason why, naming the next allowed start of a
// window of its length at or after notBefore.
func (p *Policy) windowRejection(w domain.Window, why string, notBefore time.Time) *domain.Rejection {
	length := w.End.Sub(w.Start)
	next := fmt.Sprintf("no %s window is allowed in the %d days from %s", length, Horizon/domain.Day, notBefore.UTC().Format(time.RFC3339))
	if s, ok := p.NextAllowed(length, notBefore); ok {
		next = fmt.Sprintf("the next allowed start of a %s window is %s", length, s.UTC().Format(time.RFC3339))
	}
	return domain.InvalidParameter("window", "window %s to %s %s of the policy for %s; %s",
		w.Start.UTC().Format(time.RFC3339), w.End.UTC().Format(time.RFC3339), why, p.scope.ID, next)
}

// updateRejection refuses an update task stored at t inside a blackout or outside every
// allowed window; nil when the policy allows work at t.
func (p *Policy) updateRejection(task domain.Task, t time.Time) *domain.Rejection {
	var why string
	switch {
	case p.InBlackout(t):
		for _, b := range p.blackouts {
			if !t.Before(b.start) && t.Before(b.end) {
				why = "falls in the blackout " + b.describe()
				break
			}
		}
	case !p.InAllowedWindow(t):
		why = "is outside every allowed window"
	default:
		return nil
	}
	next := ""
	if s, ok := p.NextAllowed(time.Second, t); ok {
		next = fmt.Sprintf("; work is next allowed from %s", s.UTC().Format(time.RFC3339))
	}
	return &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "policy",
		Message: fmt.Sprintf("%s stored at %s %s of the policy for %s%s; force it for urgent work", task, t.UTC().Format(time.RFC3339), why, p.scope.ID, next)}
}
