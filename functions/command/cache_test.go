package command_test

import (
	"context"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// The replica remembers the records it wrote; a record changed behind its back (another
// replica, an operator's repair) must still decide every command.
func TestHandle_RecordChangedElsewhereIsNotJudgedOnTheRememberedCopy(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{})
	key := domain.MustKey(cluster)
	st, err := store.Open(context.Background(), env.JS)
	if err != nil {
		t.Fatal(err)
	}
	change := func(f func(*domain.Record)) {
		t.Helper()
		rec, rev := record(t, env, key)
		next := rec
		f(&next)
		// The store takes only a record that moves forward, as a later command's would.
		next.LastCommandAt = next.LastCommandAt.Add(time.Nanosecond)
		if _, err := st.Put(context.Background(), key, store.Versioned{Record: rec, Rev: rev}, next); err != nil {
			t.Fatalf("change the record elsewhere: %v", err)
		}
	}

	send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskPending})
	events(t, env.JS, key, 1)
	// Remembered: Pending, idle (Pending would be applied). Now: an update in progress.
	change(func(r *domain.Record) { r.State, r.Updating = domain.StatePlanned, true })
	send(t, env.JS, domain.Command{ID: "c-2", ResourceID: cluster, Task: domain.TaskPending})
	if ev := events(t, env.JS, key, 2)[1]; ev.Outcome != domain.OutcomeRejected || ev.From != domain.StatePlanned {
		t.Errorf("Pending during an update changed elsewhere: %+v, want rejected from Planned", ev)
	}

	send(t, env.JS, domain.Command{ID: "c-3", ResourceID: cluster, Task: domain.TaskUpdateSucceeded})
	events(t, env.JS, key, 3)
	send(t, env.JS, domain.Command{ID: "c-4", ResourceID: cluster, Task: domain.TaskEverything})
	events(t, env.JS, key, 4)
	// Remembered: an update in progress (Pending would be refused). Now: idle in Pending.
	change(func(r *domain.Record) { r.State, r.Updating = domain.StatePending, false })
	send(t, env.JS, domain.Command{ID: "c-5", ResourceID: cluster, Task: domain.TaskPending})
	if ev := events(t, env.JS, key, 5)[4]; ev.Outcome != domain.OutcomeApplied || ev.From != domain.StatePending {
		t.Errorf("Pending after the update was ended elsewhere: %+v, want applied from Pending", ev)
	}
	if rec, rev := record(t, env, key); rec.LastCommandID != "c-5" || rev == 0 {
		t.Errorf("record %+v at %d, want c-5 applied last", rec, rev)
	}
}
