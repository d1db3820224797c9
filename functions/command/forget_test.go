package command_test

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/test/testenv"
)

// Forget leaves a tombstone: a late copy of a command handled before it changes nothing (a
// redelivery is skipped, the same id sent again is a duplicate), and the next new command
// tracks the entity again from None.
func TestHandle_ForgetKeepsExactlyOnce(t *testing.T) {
	env := testenv.Start(t)
	var (
		mu       sync.Mutex
		first    *function.Message
		replayed = make(chan error, 1)
	)
	// keep holds on to the first command's delivery and, once the Forget is handled, hands
	// the handler that same delivery again, as a redelivery after a lost ack would.
	keep := func(h function.Handler) function.Handler {
		return func(ctx context.Context, m function.Message) error {
			err := h(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			switch cmd, _ := domain.DecodeCommand(m.Data, "", ""); {
			case cmd.ID == "f-1" && first == nil:
				c := m
				first = &c
			case cmd.ID == "f-3" && err == nil && first != nil:
				again := *first
				again.Delivered = 2
				replayed <- h(ctx, again)
			}
			return err
		}
	}
	startReplicas(t, env, 1, command.Config{}, keep)
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "f-1", ResourceID: cluster, Task: domain.TaskEverything})
	send(t, env.JS, domain.Command{ID: "f-2", ResourceID: cluster, Task: domain.TaskForget})
	send(t, env.JS, domain.Command{ID: "f-3", ResourceID: cluster, Task: domain.TaskForget, Force: true, Reason: "decommissioned"})
	evs := events(t, env.JS, key, 3)
	if evs[1].Outcome != domain.OutcomeRejected || evs[1].Code != domain.CodeRequestNotAllowed {
		t.Errorf("Forget while updating: %+v, want RequestNotAllowed", evs[1])
	}
	if e := evs[2]; e.Outcome != domain.OutcomeApplied || e.From != domain.StateUnplanned || e.To != domain.StateNone || !e.Force {
		t.Errorf("forced Forget: %+v", e)
	}
	select {
	case err := <-replayed:
		if err != nil {
			t.Fatalf("redelivery after the Forget: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the first command was not delivered again")
	}
	rec, rev := record(t, env, key)
	if !rec.Forgotten() || rec.State != domain.StateNone || rec.Reason != "decommissioned" || rev != 2 {
		t.Fatalf("after the redelivery: revision %d, %+v, want the tombstone of revision 2", rev, rec)
	}

	// The first command's id once more, as a new message: a duplicate, still forgotten.
	b, _ := domain.Command{ID: "f-1", ResourceID: cluster, Task: domain.TaskEverything}.Encode()
	sendRaw(t, env.JS, key, "", b)
	evs = events(t, env.JS, key, 4)
	if evs[3].Outcome != domain.OutcomeDuplicate || len(evs) != 4 {
		t.Fatalf("events %+v, want the old id as a duplicate, and nothing from the redelivery", evs)
	}
	if rec, _ := record(t, env, key); !rec.Forgotten() {
		t.Fatalf("a duplicate brought it back: %+v", rec)
	}

	// A new command tracks it again, as if it were new.
	send(t, env.JS, domain.Command{ID: "f-4", ResourceID: cluster, Task: domain.TaskPending})
	evs = events(t, env.JS, key, 5)
	if e := evs[4]; e.Outcome != domain.OutcomeApplied || e.From != domain.StateNone || e.To != domain.StatePending {
		t.Errorf("new command after Forget: %+v", e)
	}
	if rec, _ := record(t, env, key); rec.Forgotten() || rec.State != domain.StatePending || rec.Reason != "" {
		t.Errorf("record %+v, want tracked again, Pending", rec)
	}
}

func TestHandle_ResourceIDPatternRefusesOthersButForget(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{ResourceIDPattern: regexp.MustCompile(domain.ARMResourceIDPattern)})
	const stray = "c9"
	key := domain.MustKey(stray)
	send(t, env.JS, domain.Command{ID: "p-1", ResourceID: stray, Task: domain.TaskEverything})
	send(t, env.JS, domain.Command{ID: "p-2", ResourceID: stray, Task: domain.TaskForget})
	send(t, env.JS, domain.Command{ID: "p-3", ResourceID: cluster, Task: domain.TaskPending})
	evs := events(t, env.JS, key, 2)
	if e := evs[0]; e.Outcome != domain.OutcomeRejected || e.Code != domain.CodeInvalidParameter || e.Target != "resourceId" {
		t.Errorf("stray ID: %+v, want InvalidParameter on resourceId", e)
	}
	if e := evs[1]; e.Outcome != domain.OutcomeApplied || e.Task != domain.TaskForget {
		t.Errorf("Forget of a stray ID: %+v, want applied", e)
	}
	if e := events(t, env.JS, domain.MustKey(cluster), 1)[0]; e.Outcome != domain.OutcomeApplied {
		t.Errorf("ARM ID: %+v, want applied", e)
	}
}

// A tombstone leaves the bucket after ForgetAfter: the entity reads as never seen, its history
// stays, and a new command tracks it from None as a new entity.
func TestHandle_TombstoneLeavesAfterForgetAfter(t *testing.T) {
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{ForgetAfter: 2 * time.Second})
	key := domain.MustKey(cluster)
	send(t, env.JS, domain.Command{ID: "t-1", ResourceID: cluster, Task: domain.TaskPending})
	send(t, env.JS, domain.Command{ID: "t-2", ResourceID: cluster, Task: domain.TaskForget})
	events(t, env.JS, key, 2)
	if rec, rev := record(t, env, key); !rec.Forgotten() || rev == 0 {
		t.Fatalf("after Forget: revision %d, %+v, want a tombstone", rev, rec)
	}
	testenv.Eventually(t, 15*time.Second, "the tombstone gone", func() bool {
		_, rev := record(t, env, key)
		return rev == 0
	})
	if n := len(testenv.Events(t, env.JS, domain.EventSubject(key))); n != 2 {
		t.Errorf("%d events after the tombstone left, want its history of 2", n)
	}
	send(t, env.JS, domain.Command{ID: "t-3", ResourceID: cluster, Task: domain.TaskPending})
	if e := events(t, env.JS, key, 3)[2]; e.Outcome != domain.OutcomeApplied || e.From != domain.StateNone || e.To != domain.StatePending {
		t.Errorf("a command after the tombstone left: %+v, want applied from None", e)
	}
}
