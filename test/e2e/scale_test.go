package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"maintsignals/infra/provision"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// The signal at a fleet's scale, scaled down to the ratio of a million clusters on a minute
// tick: a tick of 4 s (a run's deadline 3 s), 40,000 clusters, and a collector that takes
// 400 ms to answer each request, so that one emitter replica (two requests in flight) can send
// only about half of the fleet within the deadline, as one replica could send only part of a
// million within 30 s. On one machine every process shares the same cores, so the test makes
// the collector's answer time, not the CPU, the limit of a replica; the bench measures what
// replicas cost in CPU. Emitter replicas are maintctl processes; a receiver counts the
// distinct cloud.resource_id of each tick.
//
// It is heavy for a shared machine (about two minutes, four emitter processes): it runs when
// MAINT_SCALE is set, in a CI step of its own.
func TestScale_EnoughReplicasMakeEveryTickWhole(t *testing.T) {
	if os.Getenv("MAINT_SCALE") == "" {
		t.Skip("the fleet-scale test runs with MAINT_SCALE=1 (a CI step of its own)")
	}
	const (
		tick  = 4 * time.Second
		fleet = 40_000
		hold  = 400 * time.Millisecond
	)
	env := testenv.StartListening(t, testenv.WithProvision(func(c *provision.Config) { c.Tick = tick }))
	testenv.FillRecords(t, env.JS, fleet, func(i int) string {
		return fmt.Sprintf("/subscriptions/%08x-1bf0-4dda-aec3-%012x/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/cluster-%06d", i/20, i/20, i%50, i)
	})
	r := otlpreceiver.Start(t, otlpreceiver.WithoutPayloads(), otlpreceiver.WithTickCounts("cluster.maintenance.status", "cloud.resource_id", 64))
	r.SetDelay(hold)

	// One replica: every tick it sends part of the fleet, a different part each time, so
	// that over a few ticks every cluster is sent, none is always left out.
	alone := time.Now()
	startEmitterProc(t, env.Server.URL(), r, 0)
	time.Sleep(7 * tick)
	ticks := finished(r, alone, tick)
	if len(ticks) < 4 {
		t.Fatalf("%d ticks emitted in 7 ticks' time", len(ticks))
	}
	for _, tc := range ticks {
		t.Logf("one replica: tick at %s, %d of %d clusters, %d twice", tc.At.Format("15:04:05"), tc.Distinct, fleet, tc.Duplicates)
		if tc.Distinct >= fleet || tc.Duplicates != 0 {
			t.Errorf("one replica, tick at %s: %d clusters (%d twice); want part of the fleet once each: the test needs a fleet one replica cannot send in time",
				tc.At.Format("15:04:05"), tc.Distinct, tc.Duplicates)
		}
	}
	if seen := r.SeenSince(ticks[0].At); seen != fleet {
		t.Errorf("one replica: %d of %d clusters sent in %d ticks; the runs that stop short leave out the same ones", seen, fleet, len(ticks))
	}

	// Four replicas share the shards: once spread, every tick carries every cluster once.
	for i := 1; i < 4; i++ {
		startEmitterProc(t, env.Server.URL(), r, i)
	}
	shared := time.Now()
	var whole time.Time
	testenv.Eventually(t, 2*time.Minute, "a whole tick with four replicas", func() bool {
		for _, tc := range finished(r, shared, tick) {
			if tc.Distinct == fleet {
				whole = tc.At
				return true
			}
		}
		return false
	})
	t.Logf("four replicas: first whole tick %s after the other three started", whole.Sub(shared).Round(100*time.Millisecond))
	time.Sleep(5 * tick)
	after := finished(r, whole, tick)
	if len(after) < 4 {
		t.Fatalf("%d ticks emitted in 5 ticks' time", len(after))
	}
	for _, tc := range after {
		if tc.Distinct != fleet || tc.Duplicates != 0 {
			t.Errorf("four replicas, tick at %s: %d of %d clusters, %d twice; want every cluster once", tc.At.Format("15:04:05"), tc.Distinct, fleet, tc.Duplicates)
		}
	}
	t.Logf("four replicas: %d ticks in a row, each with all %d clusters once", len(after), fleet)
}

// finished is the ticks counted whose time is at or after from and whose run is over (a
// tick older than one tick), oldest first.
func finished(r *otlpreceiver.Receiver, from time.Time, tick time.Duration) []otlpreceiver.TickCount {
	var out []otlpreceiver.TickCount
	for _, tc := range r.TickCounts() {
		if !tc.At.Before(from) && time.Since(tc.At) > tick {
			out = append(out, tc)
		}
	}
	return out
}

// startEmitterProc runs `maintctl function emitter` against url, exporting to r.
func startEmitterProc(t *testing.T, url string, r *otlpreceiver.Receiver, i int) {
	t.Helper()
	cmd := exec.Command(bin, "function", "emitter", "--server", url)
	cmd.Env = testenv.ProcEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+r.GRPCEndpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		fmt.Sprintf("OTEL_RESOURCE_ATTRIBUTES=replica=%d", i))
	p := testenv.StartProc(t, fmt.Sprintf("emitter-%d", i), cmd)
	p.WaitFor("function started", 30*time.Second)
}
