package emitter_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// A forgotten entity is out of the next emission at once: no status points, not in the fleet
// counts, although a None entity would otherwise be emitted for the retention period.
func TestEmit_LeavesOutForgottenEntities(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Minute))
	r := otlpreceiver.Start(t)
	st := openStore(t, env.JS)
	kept, gone := aroID("f1", 1), aroID("f1", 2)
	now := time.Now().UTC()
	put(t, st, domain.Record{ResourceID: kept, State: domain.StateUnplanned, StateSince: now})
	put(t, st, domain.Record{ResourceID: gone, State: domain.StateNone, StateSince: now, ForgottenAt: now})
	e, err := emitter.New(context.Background(), env.JS, newTelemetry(t, r, otlpreceiver.GRPC), emitter.Config{Logger: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Emit(testenv.Context(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if res.Entities != 1 {
		t.Errorf("result %+v, want 1 entity emitted", res)
	}
	x, err := r.Await(testenv.Context(t, 5*time.Second), 0, isRun)
	if err != nil {
		t.Fatal(err)
	}
	if got := entityLines(x, gone); len(got) != 0 {
		t.Errorf("forgotten entity emitted: %v", got)
	}
	if got, want := entityLines(x, kept), wantLines(kept, domain.StateUnplanned, false); !reflect.DeepEqual(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
	if got := fleet(x); got != "none=0 pending=0 planned=0 unplanned=1 customer_action_needed=0" {
		t.Errorf("fleet %s", got)
	}
}
