package emitter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// quietLogger keeps test output to warnings; the emitter logs every run at info.

// newTelemetry sets up telemetry towards r: explicit endpoint and protocol (so tests need
// not touch the environment), health metrics every 250ms, quick gRPC reconnects.
func newTelemetry(t testing.TB, r *otlpreceiver.Receiver, protocol string) *telemetry.Telemetry {
	t.Helper()
	return setupTelemetry(t, r.Endpoint(protocol), protocol)
}

// setupTelemetry is newTelemetry with the endpoint and protocol given ("": from the environment).
func setupTelemetry(t testing.TB, endpoint, protocol string) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{
		Endpoint:          endpoint,
		Protocol:          protocol,
		Interval:          250 * time.Millisecond,
		Timeout:           time.Second,
		ReconnectMaxDelay: 200 * time.Millisecond,
		Logger:            testenv.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	})
	return tel
}

// tick is a handled tick, as a test's wrapper around the handler saw it.
type tick struct {
	replica   string
	consumer  string
	delivered uint64
	seq       uint64
	pending   uint64
	next      string
}

// ticks records what a set of replicas handled.
type ticks struct {
	mu   sync.Mutex
	list []tick
}

// wrap notes each tick as its handling starts.
func (tk *ticks) wrap(replica string, h function.Handler) function.Handler {
	return func(ctx context.Context, msg function.Message) error {
		tk.mu.Lock()
		tk.list = append(tk.list, tick{replica: replica, consumer: msg.Consumer, delivered: msg.Delivered, seq: msg.Seq, pending: msg.Pending, next: msg.Header.Get(jetstream.ScheduleNextHeader)})
		tk.mu.Unlock()
		return h(ctx, msg)
	}
}

func (tk *ticks) all() []tick {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return append([]tick(nil), tk.list...)
}

// startEmitter runs an emitter replica as `maintctl function emitter` would, with the
// handler wrapped by tk when tk is not nil. The returned stop drains it and waits.
func startEmitter(t testing.TB, js jetstream.JetStream, tel *telemetry.Telemetry, cfg emitter.Config, tk *ticks, replica string) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testenv.Quiet()
	}
	e, err := emitter.New(context.Background(), js, tel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := e.RuntimeConfig()
	rc.BalanceEvery = 300 * time.Millisecond // the shards spread over the replicas within a tick or two
	if tk != nil {
		rc.Handler = tk.wrap(replica, rc.Handler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- function.Run(ctx, js, rc) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("emitter %s: %v", replica, err)
			}
			_ = e.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// put writes rec as the entity's current record, whatever its revision.
func put(t testing.TB, st *store.Store, rec domain.Record) {
	t.Helper()
	key := domain.MustKey(rec.ResourceID)
	ctx := testenv.Context(t, 5*time.Second)
	prev, rev, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rec.Version = domain.RecordVersion
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = time.Now()
	}
	// As if a later command wrote it: the store refuses a record that moves backwards.
	rec.LastCommandSeq = prev.LastCommandSeq + 1
	if _, err := st.Put(ctx, key, store.Versioned{Record: prev, Rev: rev}, rec); err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB, js jetstream.JetStream) *store.Store {
	t.Helper()
	st, err := store.Open(testenv.Context(t, 5*time.Second), js)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// isRun matches the last request of a shard's run: the one that carries its fleet view.
func isRun(e otlpreceiver.Export) bool { return e.Has(emitter.MetricEntities) }

// runTime is the timestamp of an emission's points: the time of its tick.
func runTime(e otlpreceiver.Export) time.Time {
	for _, name := range []string{emitter.MetricEntities, emitter.MetricStatus} {
		if p := e.Find(name, nil); len(p) > 0 {
			return p[0].Time
		}
	}
	return time.Time{}
}

// ticksOf is the whole emissions of ticks received (of which every one of shards fleet
// views has come), each merged into one export, oldest tick first.
func ticksOf(r *otlpreceiver.Receiver, shards int) []otlpreceiver.Export {
	ems := r.Emissions(shards)
	sort.Slice(ems, func(i, j int) bool { return ems[i].Tick.Before(ems[j].Tick) })
	out := make([]otlpreceiver.Export, len(ems))
	for i, e := range ems {
		out[i] = e.Export
	}
	return out
}

// awaitRunAfter waits for the whole emission of a tick later than at (of the shards the
// provisioning made) and returns it merged.
func awaitRunAfter(t testing.TB, r *otlpreceiver.Receiver, at time.Time, within time.Duration) otlpreceiver.Export {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, e := range ticksOf(r, shards) {
			if runTime(e).After(at) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no whole emission of a tick after %s", at.Format("15:04:05.000"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shards is the shard count of testenv's provisioning.
const shards = domain.DefaultShards

// entityLines renders the per-entity points of an export for resource ID id, sorted.
func entityLines(e otlpreceiver.Export, id string) []string {
	var out []string
	for _, p := range e.Find(emitter.MetricStatus, map[string]string{emitter.AttrResourceID: id}) {
		out = append(out, p.String())
	}
	for _, p := range e.Find(emitter.MetricPUCM, map[string]string{emitter.AttrPUCMResourceID: id}) {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

// wantLines are the points an entity in state s must have.
func wantLines(id string, s domain.State, pucm bool) []string {
	var out []string
	for _, v := range domain.States {
		val := 0
		if v == s {
			val = 1
		}
		out = append(out, fmt.Sprintf("%s{%s=%s,%s=%s} %d", emitter.MetricStatus, emitter.AttrResourceID, id, emitter.AttrState, v.MetricValue(), val))
	}
	if pucm {
		out = append(out, fmt.Sprintf("%s{%s=%s,%s=%s} 1", emitter.MetricPUCM, emitter.AttrPUCMResourceID, id, emitter.AttrPUCMState, s.PUCMValue()))
	}
	sort.Strings(out)
	return out
}

// fleet renders cluster.maintenance.entities of an export as state=count, in state order,
// summed over the shards as the readers of the fleet gauges do.
func fleet(e otlpreceiver.Export) string {
	var parts []string
	for _, s := range domain.States {
		var sum float64
		for _, p := range e.Find(emitter.MetricEntities, map[string]string{emitter.AttrState: s.MetricValue()}) {
			sum += p.Value
		}
		parts = append(parts, fmt.Sprintf("%s=%g", s.MetricValue(), sum))
	}
	return strings.Join(parts, " ")
}

// counter sums the latest value of a health counter with outcome, over the replicas
// (distinct service.instance.id) and shards that reported it.
func counter(r *otlpreceiver.Receiver, name, outcome string) float64 {
	latest := map[string]otlpreceiver.Point{}
	for _, p := range otlpreceiver.Find(r.Points(), name, map[string]string{emitter.AttrOutcome: outcome}) {
		id := p.Resource["service.instance.id"] + "/" + p.Attrs[emitter.AttrShard]
		if q, ok := latest[id]; !ok || !p.Time.Before(q.Time) {
			latest[id] = p
		}
	}
	var sum float64
	for _, p := range latest {
		if p.Type == otlpreceiver.Histogram {
			sum += float64(p.Count)
		} else {
			sum += p.Value
		}
	}
	return sum
}

// awaitCounter waits until counter(...) reaches at least want.
func awaitCounter(t testing.TB, r *otlpreceiver.Receiver, name, outcome string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := counter(r, name, outcome)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{outcome=%s} = %g, want at least %g", name, outcome, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetID is a realistic resource ID of a large fleet: a subscription GUID per 20 clusters,
// so that IDs compress as real ones do rather than as a counter does.
func fleetID(i int) string {
	g := rand.New(rand.NewPCG(uint64(i/20), 42))
	sub := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", g.Uint32(), g.Uint32()&0xffff, g.Uint32()&0xffff, g.Uint32()&0xffff, g.Uint64()&0xffffffffffff)
	return aroID(sub, i)
}

// aroID is a realistic resource ID.
func aroID(sub string, i int) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/cluster-%06d", sub, i%50, i)
}

// newTelemetryFromEnv sets up telemetry from the OTLP environment variables alone.
func newTelemetryFromEnv(t testing.TB) *telemetry.Telemetry {
	t.Helper()
	return setupTelemetry(t, "", "")
}

// fill writes n records into the bucket of env (testenv.FillRecords).
func fill(t testing.TB, env *testenv.Env, n int, id func(int) string) []int64 {
	t.Helper()
	return testenv.FillRecords(t, env.JS, n, id)
}
