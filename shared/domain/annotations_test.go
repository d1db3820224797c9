package domain_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

// TestAnnotate: the annotations of an applied outcome, from the record before the command and
// the command's stored time, with the window's edges (its start is inside, its end is not).
func TestAnnotate(t *testing.T) {
	start := time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)
	end := start.Add(4 * time.Hour)
	w := &domain.Window{Start: start, End: end}
	pending := domain.Record{State: domain.StatePending, Window: w}
	planned := domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, Window: w}
	unplanned := domain.Record{State: domain.StateUnplanned, Updating: true, Task: domain.TaskCertificatesRenewal}
	ns := time.Nanosecond
	for _, tc := range []struct {
		name           string
		prev           domain.Record
		task           domain.Task
		outcome        domain.Outcome
		from, to       domain.State
		stored         time.Time
		category       string
		inWindow       domain.Known
		actionRequired bool
	}{
		{name: "an announced update started at the window's start is planned and in the window", prev: pending, task: domain.TaskEverything,
			from: domain.StatePending, to: domain.StatePlanned, stored: start, category: "planned", inWindow: domain.KnownTrue},
		{name: "an announced update started a moment before the window is planned and not in it", prev: pending, task: domain.TaskEverything,
			from: domain.StatePending, to: domain.StatePlanned, stored: start.Add(-ns), category: "planned", inWindow: domain.KnownFalse},
		{name: "an announced update started a moment before the window's end is in it", prev: pending, task: domain.TaskOperatorUpdate,
			from: domain.StatePending, to: domain.StatePlanned, stored: end.Add(-ns), category: "planned", inWindow: domain.KnownTrue},
		{name: "an announced update started at the window's end is not in it", prev: pending, task: domain.TaskEverything,
			from: domain.StatePending, to: domain.StatePlanned, stored: end, category: "planned", inWindow: domain.KnownFalse},
		{name: "an unannounced update is unplanned, with no window to be in", prev: domain.Record{State: domain.StateNone}, task: domain.TaskCertificatesRenewal,
			from: domain.StateNone, to: domain.StateUnplanned, stored: start, category: "unplanned"},
		{name: "the outcome of planned work is planned, judged against the window it ran in", prev: planned, task: domain.TaskUpdateSucceeded,
			from: domain.StatePlanned, to: domain.StateNone, stored: end.Add(time.Minute), category: "planned", inWindow: domain.KnownFalse},
		{name: "a failed planned update inside its window", prev: planned, task: domain.TaskUpdateFailed,
			from: domain.StatePlanned, to: domain.StatePlanned, stored: start.Add(time.Hour), category: "planned", inWindow: domain.KnownTrue},
		{name: "the outcome of unplanned work is unplanned", prev: unplanned, task: domain.TaskUpdateSucceeded,
			from: domain.StateUnplanned, to: domain.StateNone, stored: start, category: "unplanned"},
		{name: "entering CustomerActionNeeded requires action, and is no update", prev: pending, task: domain.TaskCustomerActionNeeded,
			from: domain.StatePending, to: domain.StateCustomerActionNeeded, stored: start, actionRequired: true},
		{name: "an announcement carries no annotation", prev: domain.Record{State: domain.StateNone}, task: domain.TaskPending,
			from: domain.StateNone, to: domain.StatePending, stored: start},
		{name: "a refused update carries none", prev: pending, task: domain.TaskEverything, outcome: domain.OutcomeRejected,
			from: domain.StatePending, to: domain.StatePending, stored: start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := domain.Event{Task: tc.task, Outcome: tc.outcome, From: tc.from, To: tc.to}
			if ev.Outcome == "" {
				ev.Outcome = domain.OutcomeApplied
			}
			domain.Annotate(&ev, tc.prev, tc.stored)
			if ev.Category != tc.category || ev.InWindow != tc.inWindow || ev.ActionRequired != tc.actionRequired {
				t.Fatalf("category %q inWindow %v actionRequired %v, want %q %v %v", ev.Category, ev.InWindow, ev.ActionRequired, tc.category, tc.inWindow, tc.actionRequired)
			}
		})
	}
}

// TestAnnotate_JSON: inWindow is true or false when known and absent when not, and reads back.
func TestAnnotate_JSON(t *testing.T) {
	for _, tc := range []struct {
		in   domain.Known
		want string
	}{{domain.KnownTrue, `"inWindow":true`}, {domain.KnownFalse, `"inWindow":false`}, {domain.Unknown, ""}} {
		b, err := domain.EncodeEvent(domain.Event{InWindow: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		if (tc.want == "" && strings.Contains(got, "inWindow")) || !strings.Contains(got, tc.want) {
			t.Fatalf("%v encodes as %s, want %q", tc.in, got, tc.want)
		}
		back, err := domain.DecodeEvent(b)
		if err != nil || back.InWindow != tc.in {
			t.Fatalf("%s reads back as %v (%v), want %v", b, back.InWindow, err, tc.in)
		}
	}
	var k domain.Known
	if err := json.Unmarshal([]byte(`"yes"`), &k); err == nil {
		t.Fatal(`"yes" read as an inWindow`)
	}
}
