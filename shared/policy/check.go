package policy

import (
	"time"

	"maintsignals/shared/domain"
)

// Verdict is how a window for an entity would be judged by the command function, announced
// now, and the next allowed window of its length: the answer of `maintctl policy check`, whose
// JSON it is.
type Verdict struct {
	ResourceID string         `json:"resourceId"`
	Window     domain.Window  `json:"window"`
	Scope      string         `json:"scope,omitempty"` // of the policy in force; "" when none
	Revision   uint64         `json:"revision,omitempty"`
	Notice     string         `json:"notice"` // the notice in force
	Allowed    bool           `json:"allowed"`
	Code       domain.Code    `json:"code,omitempty"`
	Target     string         `json:"target,omitempty"`
	Message    string         `json:"message,omitempty"`
	Next       *domain.Window `json:"next,omitempty"` // the next allowed window of that length
}

// Check judges w as a Pending announcing it at now would be (Enforce) under p, the policy in
// force for the entity at revision (nil: none covers it), and finds the next allowed window of
// the same length at or after both the window's start and now plus the notice in force.
func Check(resourceID string, w domain.Window, p *Policy, revision uint64, minNotice time.Duration, now time.Time) Verdict {
	res := Verdict{ResourceID: resourceID, Window: w}
	if p != nil {
		res.Scope, res.Revision = p.Document().Scope, revision
	}
	notice := NoticeInForce(p, minNotice)
	res.Notice = domain.FormatDuration(notice)
	dec := Enforce(domain.Command{ID: "check", ResourceID: resourceID, Task: domain.TaskPending, Window: &w}, now, p, minNotice)
	res.Allowed = dec.Rejection == nil
	if !res.Allowed {
		res.Code, res.Target, res.Message = dec.Rejection.Code, dec.Rejection.Target, dec.Rejection.Message
	}
	length, notBefore := w.End.Sub(w.Start), now.Add(notice)
	if w.Start.After(notBefore) {
		notBefore = w.Start
	}
	next, found := notBefore, true
	if p != nil {
		next, found = p.NextAllowed(length, notBefore)
	}
	if found {
		res.Next = &domain.Window{Start: next.UTC(), End: next.Add(length).UTC()}
	}
	return res
}
