package main

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// fillBucket writes records so that the bucket tracks n entities in all, spread over every
// state (one in a hundred with a window), with asynchronous publishes on the bucket's subjects.
func fillBucket(ctx context.Context, js jetstream.JetStream, from, n int) error {
	ajs, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for i := from; i < n; i++ {
		id := entityID(i)
		b, err := domain.EncodeRecord(fleetRecord(i, uint64(i+1), now, matureRecords))
		if err != nil {
			return err
		}
		if _, err := ajs.PublishAsync(domain.RecordSubject(domain.MustKey(id)), b); err != nil {
			return err
		}
		if (i-from)%4096 == 4095 {
			select {
			case <-ajs.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	select {
	case <-ajs.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fleetRecord is the record of the bench's i-th entity, spread over every state (one in a
// hundred with a window), written by the command of stream sequence seq; grown records as
// after many commands (mature).
func fleetRecord(i int, seq uint64, now time.Time, grown bool) domain.Record {
	r := domain.Record{ResourceID: entityID(i), State: domain.States[i%len(domain.States)], StateSince: now, UpdatedAt: now, LastCommandID: "bench", LastCommandSeq: seq, Version: domain.RecordVersion}
	if i%100 == 1 {
		// One entity in a hundred is Pending with a window announced for tomorrow
		// morning: its one-day reminder is due.
		r.Window = &domain.Window{Start: now.Add(12 * time.Hour), End: now.Add(16 * time.Hour)}
	}
	if grown {
		mature(&r, i)
	}
	return r
}

// matureRecords makes fillBucket write records as they are after a while (-mature).
var matureRecords bool

// mature gives a record the history of an entity that has seen many commands: the ids of the
// last domain.RecentIDs and the outcome event of the last one.
func mature(r *domain.Record, i int) {
	for c := range domain.RecentIDs {
		r.Remember(fmt.Sprintf("%08x-5e1f-4c3a-9d7b-%012x", i, c))
	}
	r.LastCommandID = r.RecentCommandIDs[len(r.RecentCommandIDs)-1]
	r.LastEvent = &domain.Event{CommandID: r.LastCommandID, ResourceID: r.ResourceID, Task: domain.TaskPending, Outcome: domain.OutcomeApplied,
		From: domain.StateNone, To: r.State, Message: "applied", Revision: r.LastCommandSeq, At: r.UpdatedAt, Actor: "sre@example.com", CommandSeq: r.LastCommandSeq}
	r.LastCommandAt = r.UpdatedAt
}

// entityID is a realistic ARO resource ID.
func entityID(i int) string {
	return fmt.Sprintf("/subscriptions/%08x-1bf0-4dda-aec3-%012x/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/cluster-%07d", i/20, i/20, i%50, i)
}

// cost is what one operation took.
type cost struct {
	wall time.Duration
	peak uint64 // peak RSS of the process during the operation, bytes
	heap uint64 // peak live Go heap above the level before it, bytes
}

func (c cost) String() string {
	return fmt.Sprintf("%7.2f s, peak RSS %5.0f MB, peak heap +%4.0f MB", c.wall.Seconds(), mb(c.peak), mb(c.heap))
}

func mb(b uint64) float64 { return float64(b) / 1e6 }

// measure runs op once after a GC and reports its wall time and memory.
func measure(op func() error) (cost, error) {
	goruntime.GC()
	base := heapObjects()
	resetPeakRSS()
	stop := sampleHeap()
	start := time.Now()
	err := op()
	c := cost{wall: time.Since(start)}
	if h := stop(); h > base {
		c.heap = h - base
	}
	c.peak = rssPeak()
	return c, err
}

func emitOnce(ctx context.Context, e *emitter.Emitter, want int) error {
	res, err := e.Emit(ctx)
	if err != nil {
		return err
	}
	if res.Entities != want {
		return fmt.Errorf("emitted %d entities, want %d", res.Entities, want)
	}
	return nil
}

func scanOnce(ctx context.Context, st *store.Store, want int) error {
	n := 0
	if err := st.Scan(ctx, func(store.Entry, error) error { n++; return nil }); err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("scanned %d records, want %d", n, want)
	}
	return nil
}

// exportOnce sends prebuilt points for n entities in requests of the emitter's size through the
// SDK's OTLP exporter (gzip, as the emitter's requests): the bare cost of exporting them.
func exportOnce(ctx context.Context, exp sdkmetric.Exporter, res *resource.Resource, batches []metricdata.ScopeMetrics) error {
	for _, sm := range batches {
		if err := exp.Export(ctx, &metricdata.ResourceMetrics{Resource: res, ScopeMetrics: []metricdata.ScopeMetrics{sm}}); err != nil {
			return err
		}
	}
	return nil
}

// sdkExporter is the SDK's OTLP/gRPC exporter towards endpoint, gzipped.
func sdkExporter(ctx context.Context, endpoint string) (sdkmetric.Exporter, error) {
	return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(endpoint), otlpmetricgrpc.WithCompressor("gzip"))
}

// prebuiltBatches are the points of n entities, as the emitter sends them: the status points
// and the time the entity entered its state (the records of the bench have no window).
func prebuiltBatches(n, batchPoints int) []metricdata.ScopeMetrics {
	now := time.Now()
	states := make([]attribute.KeyValue, len(domain.States))
	for i, s := range domain.States {
		states[i] = attribute.String(emitter.AttrState, s.MetricValue())
	}
	var out []metricdata.ScopeMetrics
	var dps []metricdata.DataPoint[int64]
	var since []metricdata.DataPoint[float64]
	flush := func() {
		out = append(out, metricdata.ScopeMetrics{
			Scope: instrumentation.Scope{Name: emitter.ScopeName},
			Metrics: []metricdata.Metrics{
				{Name: emitter.MetricStatus, Unit: "1", Data: metricdata.Gauge[int64]{DataPoints: dps}},
				{Name: emitter.MetricStateStart, Unit: "s", Data: metricdata.Gauge[float64]{DataPoints: since}},
			},
		})
		dps, since = nil, nil
	}
	for i := 0; i < n; i++ {
		if len(dps)+len(since)+len(states)+1 > batchPoints {
			flush()
		}
		id := attribute.String(emitter.AttrResourceID, entityID(i))
		since = append(since, metricdata.DataPoint[float64]{Attributes: attribute.NewSet(id), Time: now, Value: float64(now.UnixNano()) / 1e9})
		for j, s := range states {
			var v int64
			if j == i%len(states) {
				v = 1
			}
			dps = append(dps, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(id, s), Time: now, Value: v})
		}
	}
	flush()
	return out
}

// defaultBatchPoints is the points of one of the emitter's requests.
const defaultBatchPoints = emitter.DefaultBatchSize

// dataPoints counts the points of an aggregation of the prebuilt batches.
func dataPoints(a metricdata.Aggregation) int {
	switch g := a.(type) {
	case metricdata.Gauge[int64]:
		return len(g.DataPoints)
	case metricdata.Gauge[float64]:
		return len(g.DataPoints)
	}
	return 0
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap samples the live heap every millisecond until stop, which returns the highest.
func sampleHeap() (stop func() uint64) {
	var (
		peak uint64
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, heapObjects())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, heapObjects())
	}
}

// resetPeakRSS resets the kernel's high-water mark of the process's RSS (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rssPeak is VmHWM in bytes, 0 where unknown.
func rssPeak() uint64 { return testenv.ProcMemory("self", "VmHWM") }
