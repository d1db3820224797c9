package domain

import (
	"fmt"
	"time"
)

// column is a column of the transition table of the README (States and tasks): a task, or the group of tasks that
// behave alike.
type column int

const (
	colPending column = iota
	colNone
	colCustomerActionNeeded
	colUpdate
	colSucceeded
	colFailed
	colForget
)

func columnOf(t Task) (column, bool) {
	switch t {
	case TaskPending:
		return colPending, true
	case TaskNone:
		return colNone, true
	case TaskCustomerActionNeeded:
		return colCustomerActionNeeded, true
	case TaskUpdateSucceeded:
		return colSucceeded, true
	case TaskUpdateFailed:
		return colFailed, true
	case TaskForget:
		return colForget, true
	}
	if t.Kind() == KindUpdate {
		return colUpdate, true
	}
	return 0, false
}

// errEffect says what a transition does to lastError.
type errEffect int

const (
	errKeep errEffect = iota
	errClear
	errSet // from the command's error field
)

// cell is one cell of the table. The zero cell is a refusal.
type cell struct {
	allowed  bool
	to       State // "" keeps the current state
	updating bool  // the resulting value of updating
	lastErr  errEffect
	forget   bool // the record becomes a tombstone (Record.ForgottenAt)
}

var (
	refused    = cell{}
	toPending  = cell{allowed: true, to: StatePending}
	toNone     = cell{allowed: true, to: StateNone}
	toCAN      = cell{allowed: true, to: StateCustomerActionNeeded}
	toPlanned  = cell{allowed: true, to: StatePlanned, updating: true, lastErr: errClear}
	toUnplan   = cell{allowed: true, to: StateUnplanned, updating: true, lastErr: errClear}
	succeeded  = cell{allowed: true, to: StateNone, lastErr: errClear}
	failedKeep = cell{allowed: true, lastErr: errSet}
	forget     = cell{allowed: true, to: StateNone, lastErr: errClear, forget: true}
)

// whileUpdating is the first row of the table: any state while an update is in progress.
var whileUpdating = [...]cell{
	colPending:              refused,
	colNone:                 refused,
	colCustomerActionNeeded: refused,
	colUpdate:               refused,
	colSucceeded:            succeeded,
	colFailed:               failedKeep,
	colForget:               refused,
}

// idle holds the other rows: the state when no update is in progress.
var idle = map[State][7]cell{
	StateNone:                 {toPending, toNone, toCAN, toUnplan, refused, refused, forget},
	StatePending:              {toPending, toNone, toCAN, toPlanned, refused, refused, forget},
	StatePlanned:              {toPending, toNone, toCAN, toPlanned, refused, refused, forget},
	StateUnplanned:            {toPending, toNone, toCAN, toUnplan, refused, refused, forget},
	StateCustomerActionNeeded: {toPending, toNone, toCAN, toUnplan, refused, refused, forget},
}

// lookup finds the cell for a task in a record, honouring force: a forced command is looked
// up as if no update were in progress, unless it is an outcome (which needs one).
func lookup(r Record, t Task, force bool) (cell, bool) {
	col, ok := columnOf(t)
	if !ok {
		return refused, false
	}
	if r.Updating && !(force && col != colSucceeded && col != colFailed) {
		return whileUpdating[col], true
	}
	row, ok := idle[r.State]
	if !ok {
		return refused, true
	}
	return row[col], true
}

// Transition is the result of applying a command: the new record and what changed.
type Transition struct {
	From, To State
	// Forced is true when force ended an update in progress.
	Forced bool
}

// Apply applies a validated command to the record of its entity and returns the new record,
// or a RequestNotAllowed rejection. It is a pure function: the same record and command always
// give the same result; at stamps stateSince and updatedAt. It does not touch the fields that
// the command handler owns (lastCommandId, lastCommandSeq, revision bookkeeping).
func Apply(r Record, c Command, at time.Time) (Record, Transition, *Rejection) {
	if r.Forgotten() && c.Task != TaskForget {
		r = r.asNew()
	}
	from := r.State
	if from == "" {
		from = StateNone
	}
	r.State = from
	cl, known := lookup(r, c.Task, c.Force)
	if !known {
		return r, Transition{From: from, To: from}, InvalidParameter("task", "unknown task %q", c.Task)
	}
	if !cl.allowed {
		return r, Transition{From: from, To: from}, notAllowed(r, c)
	}
	next := r
	tr := Transition{From: from, To: from, Forced: r.Updating && c.Force && c.Task.Kind() != KindOutcome}
	if cl.to != "" {
		next.State = cl.to
		tr.To = cl.to
	}
	next.Updating = cl.updating
	if cl.updating {
		next.Task = c.Task
	} else {
		next.Task = ""
	}
	switch cl.lastErr {
	case errClear:
		next.LastError = ""
	case errSet:
		next.LastError = c.Error
	}
	switch {
	case c.Task == TaskPending:
		// A new announcement replaces the old one entirely.
		next.Window, next.Reason, next.Campaign = c.Window, c.Reason, nil
	case next.State == StateNone:
		next.Window, next.Reason, next.Campaign = nil, c.Reason, nil
	case c.Reason != "":
		next.Reason = c.Reason
	}
	if next.ResourceID == "" {
		next.ResourceID = c.ResourceID
	}
	next.ForgottenAt = time.Time{}
	if cl.forget {
		next.ForgottenAt = at
	}
	if next.State != from || next.StateSince.IsZero() {
		next.StateSince = at
	}
	next.UpdatedAt = at
	next.Version = RecordVersion
	return next, tr, nil
}

func notAllowed(r Record, c Command) *Rejection {
	switch {
	case r.Updating:
		return reject(CodeRequestNotAllowed, "task", "task %s is not allowed while update %s is in progress; send UpdateSucceeded or UpdateFailed, or force it if the updater died", c.Task, r.Task)
	case c.Task.Kind() == KindOutcome:
		return reject(CodeRequestNotAllowed, "task", "task %s is not allowed: no update is in progress (state %s)", c.Task, r.State)
	default:
		return reject(CodeRequestNotAllowed, "task", "task %s is not allowed in state %s", c.Task, r.State)
	}
}

// Describe renders a table cell for documentation and tests.
func Describe(s State, updating bool, t Task) string {
	cl, ok := lookup(Record{State: s, Updating: updating}, t, false)
	if !ok || !cl.allowed {
		return "refused"
	}
	to := cl.to
	if to == "" {
		to = s
	}
	return fmt.Sprintf("%s updating=%t", to, cl.updating)
}

// Reschedule moves the announced window of r to w (a Reschedule that the policy in force
// allowed), applied at at: the state stays Pending with its stateSince, and the reason and the
// campaign stay with the window (it is the same announcement, moved). The new window starts a
// new series of notices. Like Apply it leaves the handler's fields alone.
func Reschedule(r Record, w Window, at time.Time) (Record, Transition) {
	next := r
	next.Window = &w
	next.UpdatedAt = at
	next.Version = RecordVersion
	return next, Transition{From: r.State, To: r.State}
}
