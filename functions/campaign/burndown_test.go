package campaign_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	core "maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// The burndown as a collector receives it over OTLP, at every tick of a campaign's life: one
// point per phase that sum to the selection, the status a state set with exactly one 1, and
// the deadline; the phases move as the updater works.
func TestCampaign_BurndownSumsToTheSelectionEveryTick(t *testing.T) {
	r := otlpreceiver.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		Endpoint: r.Endpoint(otlpreceiver.GRPC), Protocol: otlpreceiver.GRPC,
		Interval: time.Hour, Timeout: 5 * time.Second, Logger: testenv.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	s := newStack(t, fn.Config{Telemetry: tel})
	list := ids(100)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	s.mustControl(core.Control{Campaign: "b1", Action: core.ActionCreate, Spec: ptr(spec("b1", s.upload(list), earliest, "336h", nil))})
	s.waitApplied("b1", 1, len(list))

	burndown := func(step string) (map[string]int, string) {
		t.Helper()
		n := r.Len()
		s.tick()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e, err := r.Await(ctx, n, func(e otlpreceiver.Export) bool { return e.Has(fn.MetricEntities) })
		if err != nil {
			t.Fatalf("%s: no burndown exported: %v", step, err)
		}
		phases, sum := map[string]int{}, 0
		for _, p := range e.Find(fn.MetricEntities, map[string]string{fn.AttrCampaign: "b1"}) {
			phases[p.Attrs[fn.AttrPhase]] = int(p.Value)
			sum += int(p.Value)
		}
		if len(phases) != len(core.Phases) || sum != len(list) {
			t.Errorf("%s: %d phases summing to %d, want every phase summing to %d: %v", step, len(phases), sum, len(list), phases)
		}
		status, ones := "", 0
		for _, p := range e.Find(fn.MetricStatus, map[string]string{fn.AttrCampaign: "b1"}) {
			if p.Value == 1 {
				status, ones = p.Attrs[fn.AttrStatus], ones+1
			}
		}
		if ones != 1 {
			t.Errorf("%s: %d statuses at 1", step, ones)
		}
		if d := e.Find(fn.MetricDeadline, map[string]string{fn.AttrCampaign: "b1"}); len(d) != 1 || int64(d[0].Value) != earliest.Add(72*time.Hour).Unix() {
			t.Errorf("%s: deadline %v", step, d)
		}
		return phases, status
	}

	if ph, st := burndown("announced"); ph["announced"] != 100 || st != "active" {
		t.Errorf("after the announcements: %s %v", st, ph)
	}
	for i, id := range list[:60] {
		s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
		if i%12 == 0 {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateFailed, Error: "boom"})
		} else if i < 40 {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
	if ph, st := burndown("half-way"); ph["announced"] != 40 || ph["in_progress"] != 19 || ph["succeeded"] != 40-4 || ph["failed"] != 5 || st != "active" {
		t.Errorf("half-way: %s %v", st, ph)
	}
	for i, id := range list {
		if i >= 60 {
			s.send(domain.Command{ID: fmt.Sprintf("start-%d", i), ResourceID: id, Task: domain.TaskEverything})
		}
		if i >= 40 && !(i < 60 && i%12 == 0) {
			s.send(domain.Command{ID: fmt.Sprintf("end-%d", i), ResourceID: id, Task: domain.TaskUpdateSucceeded})
		}
	}
	if ph, st := burndown("the end"); ph["succeeded"] != 95 || ph["failed"] != 5 || st != "completed" {
		t.Errorf("at the end: %s %v", st, ph)
	}
}
