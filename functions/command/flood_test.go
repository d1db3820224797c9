package command_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// TestHandle_FloodOfOneEntityDoesNotStarveTheOthers floods one entity with 3,000 commands and
// sends one command to each of 40 other entities right after: every other entity's command is
// applied, the ones in other partitions while the flood is still being worked off, and the
// flood beyond the per-entity burst is refused without touching the bucket.
func TestHandle_FloodOfOneEntityDoesNotStarveTheOthers(t *testing.T) {
	const flood, others = 3000, 40
	env := testenv.Start(t)
	startReplicas(t, env, 2, command.Config{})
	victim := cluster + "-flooded"
	var cmds []domain.Command
	for i := 0; i < flood; i++ {
		task := domain.TaskPending
		if i%2 == 1 {
			task = domain.TaskNone
		}
		cmds = append(cmds, domain.Command{ID: fmt.Sprintf("flood-%d", i), ResourceID: victim, Task: task})
	}
	ids := testenv.ResourceIDs("bystander", others)
	for i, id := range ids {
		cmds = append(cmds, domain.Command{ID: fmt.Sprintf("other-%d", i), ResourceID: id, Task: domain.TaskPending})
	}
	pjs := testenv.JetStream(t, testenv.Connect(t, env.Server))
	start := time.Now()
	testenv.PublishAll(t, pjs, cmds, nil)

	floodKey := domain.MustKey(victim)
	partition := partitionOf(t, env.JS, floodKey)
	var otherPartitionsDone time.Duration
	for deadline := time.Now().Add(60 * time.Second); ; {
		pending := 0
		for _, id := range ids {
			key := domain.MustKey(id)
			if partitionOf(t, env.JS, key) == partition {
				continue
			}
			if len(readEvents(t, env.JS, domain.EventSubject(key))) == 0 {
				pending++
			}
		}
		if pending == 0 {
			otherPartitionsDone = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bystanders in other partitions still waiting after 60s", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	floodSeen := len(readEvents(t, env.JS, domain.EventSubject(floodKey)))
	evs := testenv.WaitEvents(t, env.JS, floodKey, flood, 2*time.Minute)
	floodDone := time.Since(start)
	var limited, applied int
	for _, ev := range evs {
		switch {
		case ev.Outcome == domain.OutcomeApplied:
			applied++
		case ev.Code == domain.CodeRequestNotAllowed && strings.Contains(ev.Message, "too many commands"):
			limited++
		}
	}
	for i, id := range ids {
		ev := events(t, env.JS, domain.MustKey(id), 1)[0]
		if ev.CommandID != fmt.Sprintf("other-%d", i) || ev.Outcome != domain.OutcomeApplied {
			t.Errorf("bystander %d: %+v", i, ev)
		}
	}
	t.Logf("bystanders in other partitions done after %s, with %d of %d flood outcomes out; flood done after %s: %d applied, %d refused as too many",
		otherPartitionsDone.Round(time.Millisecond), floodSeen, flood, floodDone.Round(time.Millisecond), applied, limited)
	if floodSeen >= flood {
		t.Errorf("the other partitions finished only after the whole flood")
	}
	if limited < flood/2 {
		t.Errorf("only %d of %d flood commands refused by the per-entity limit", limited, flood)
	}
}

// partitionOf is the partition token the commands stream stored key's commands under.
func partitionOf(t *testing.T, js jetstream.JetStream, key string) string {
	t.Helper()
	s, err := js.Stream(context.Background(), domain.CommandsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(domain.CommandPrefix+"*."+key))
	if err != nil {
		t.Fatal(err)
	}
	for subj := range info.State.Subjects {
		return strings.Split(subj, ".")[2]
	}
	t.Fatalf("no stored command for %s", key)
	return ""
}
