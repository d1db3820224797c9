package domain

import (
	"fmt"
	"time"
)

// Categories of maintenance, as Resource Health names them: work that was announced (the
// entity was Pending, so the work is Planned) and work that was not (Unplanned).
const (
	CategoryPlanned   = "planned"
	CategoryUnplanned = "unplanned"
)

// Contains reports whether t lies inside the window: from its start, up to but not including
// its end (at its end the window has ended, see Window.Ended).
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && !w.Ended(t) }

// Annotate sets the annotations of an applied outcome (SPEC §14), which customers and
// integrators filter on, from the record before the command (prev) and the command's stored
// time:
//   - category, on update tasks and their outcomes: planned or unplanned, by the state the
//     work runs in (the state it enters for an update task, the state it ran in for an
//     outcome);
//   - inWindow, on the same events when the entity had an announced window: whether the
//     command's stored time lies inside it (did the work happen in the announced window?);
//   - actionRequired, when the entity enters CustomerActionNeeded.
//
// Other outcomes (rejected, duplicate, dead_lettered) changed nothing and carry none.
func Annotate(ev *Event, prev Record, storedAt time.Time) {
	if ev.Outcome != OutcomeApplied {
		return
	}
	ev.ActionRequired = ev.To == StateCustomerActionNeeded && ev.From != StateCustomerActionNeeded
	var during State
	switch ev.Task.Kind() {
	case KindUpdate:
		during = ev.To
	case KindOutcome:
		during = ev.From
	default:
		return
	}
	switch during {
	case StatePlanned:
		ev.Category = CategoryPlanned
	case StateUnplanned:
		ev.Category = CategoryUnplanned
	default:
		return
	}
	if prev.Window != nil {
		ev.InWindow = KnownAs(prev.Window.Contains(storedAt))
	}
}

// Known is a boolean that may be unknown (its zero value, left out of JSON): events stay
// comparable with ==, which a *bool would not allow.
type Known uint8

// The values of a Known.
const (
	Unknown Known = iota
	KnownFalse
	KnownTrue
)

// KnownAs is b, known.
func KnownAs(b bool) Known {
	if b {
		return KnownTrue
	}
	return KnownFalse
}

// IsZero reports whether k is unknown (json's omitzero).
func (k Known) IsZero() bool { return k == Unknown }

// MarshalJSON writes true or false (or null when unknown and not left out).
func (k Known) MarshalJSON() ([]byte, error) {
	switch k {
	case KnownTrue:
		return []byte("true"), nil
	case KnownFalse:
		return []byte("false"), nil
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads true, false or null.
func (k *Known) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*k = KnownTrue
	case "false":
		*k = KnownFalse
	case "null":
		*k = Unknown
	default:
		return fmt.Errorf("want true, false or null, got %s", b)
	}
	return nil
}
