package policy_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// TestConflict: only a revision stored after the announcement, that does not allow the window,
// while the window has not ended, of a Pending entity, conflicts.
func TestConflict(t *testing.T) {
	p := customer(t) // weekdays 22:00 Berlin 6h, a holiday freeze 2026-12-20 to 2027-01-04
	announced := utc("2026-11-01T12:00:00Z")
	inFreeze := domain.Window{Start: utc("2026-12-21T21:00:00Z"), End: utc("2026-12-22T01:00:00Z")}
	allowed := domain.Window{Start: utc("2026-11-23T21:00:00Z"), End: utc("2026-11-24T01:00:00Z")}
	pending := func(w domain.Window) domain.Record {
		return domain.Record{State: domain.StatePending, Window: &w, LastCommandAt: announced}
	}
	now := utc("2026-11-10T00:00:00Z")
	later := announced.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		r        domain.Record
		p        *policy.Policy
		since    time.Time
		now      time.Time
		conflict bool
	}{
		{"a blackout set after the announcement over its window", pending(inFreeze), p, later, now, true},
		{"the same policy in force when it was announced (forced past it)", pending(inFreeze), p, announced, now, false},
		{"a newer revision that allows the window", pending(allowed), p, later, now, false},
		{"no policy", pending(inFreeze), nil, later, now, false},
		{"the window has ended", pending(inFreeze), p, later, utc("2026-12-22T01:00:00Z"), false},
		{"the window has started: still a conflict", pending(inFreeze), p, later, utc("2026-12-21T22:00:00Z"), true},
		{"not Pending", domain.Record{State: domain.StatePlanned, Window: &inFreeze, LastCommandAt: announced}, p, later, now, false},
		{"Pending without a window", domain.Record{State: domain.StatePending, LastCommandAt: announced}, p, later, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if why := policy.Conflict(tc.r, tc.p, tc.since, tc.now); (why != "") != tc.conflict {
				t.Errorf("Conflict = %q, want a conflict %t", why, tc.conflict)
			}
		})
	}
}
