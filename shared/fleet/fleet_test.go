package fleet_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

// TestView_Existence: what a reader says of an entity's existence, from its record: a record
// that holds only a refusal's fence (no command was ever applied) is shown as never seen, not
// as forgotten; a Forget's tombstone as seen and not tracked.
func TestView_Existence(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	const id = "/subscriptions/s/resourceGroups/rg/providers/p/c1"
	refusal := domain.Event{CommandID: "c-1", CommandSeq: 4, ResourceID: id, Outcome: domain.OutcomeRejected}
	applied := domain.Record{ResourceID: id, State: domain.StatePending, UpdatedAt: at, StateSince: at}
	forgotten := applied
	forgotten.ForgottenAt = at
	for _, tc := range []struct {
		name                  string
		rev                   uint64
		rec                   domain.Record
		exists, tracked       bool
		forgottenAtShownEmpty bool
	}{
		{name: "no record", rev: 0, rec: domain.Record{State: domain.StateNone}, forgottenAtShownEmpty: true},
		{name: "a fence alone is never seen", rev: 3, rec: domain.Record{State: domain.StateNone}.FenceRefusal(refusal, at), forgottenAtShownEmpty: true},
		{name: "an applied record is seen and tracked", rev: 3, rec: applied, exists: true, tracked: true, forgottenAtShownEmpty: true},
		{name: "a fence on an applied record changes nothing shown", rev: 4, rec: applied.FenceRefusal(refusal, at), exists: true, tracked: true, forgottenAtShownEmpty: true},
		{name: "a Forget's tombstone is seen, not tracked", rev: 5, rec: forgotten, exists: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := fleet.View(domain.MustKey(id), tc.rev, tc.rec, at, time.Hour, fleet.InForce{})
			if v.Exists != tc.exists || v.Tracked != tc.tracked || v.ForgottenAt.IsZero() != tc.forgottenAtShownEmpty {
				t.Fatalf("exists %v tracked %v forgottenAt %v, want %v %v (empty: %v)", v.Exists, v.Tracked, v.ForgottenAt, tc.exists, tc.tracked, tc.forgottenAtShownEmpty)
			}
		})
	}
}
