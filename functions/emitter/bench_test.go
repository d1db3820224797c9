package emitter_test

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"maintsignals/functions/emitter"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/otlpreceiver"
)

// BenchmarkEmit100k measures one emission over 100k tracked entities next to its bare
// parts on the same bucket and receiver: one streaming scan, and one export of as many
// points in requests of the same size. It reports, per operation, the wall time (ns/op), the
// peak Go heap above the level before the operation (peak-heap-MB) and the peak RSS of the
// process (peak-rss-MB). Server, receiver and emitter share the process, so every figure
// includes the server's and the receiver's side; compare the rows with each other.
//
//	go test -run '^$' -bench Emit100k -benchtime 3x ./functions/emitter/
func BenchmarkEmit100k(b *testing.B) {
	const n = 100_000
	env := startNATS(b, time.Hour)
	r := otlpreceiver.Start(b, otlpreceiver.WithoutPayloads())
	fill(b, env, n, fleetID)
	tel := newTelemetry(b, r, otlpreceiver.GRPC)
	e, err := emitter.New(context.Background(), env.JS, tel, emitter.Config{Logger: quietLogger(), ExportTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	st := openStore(b, env.JS)
	batches := prebuiltBatches(n, emitter.DefaultBatchSize)

	b.Run("emit", func(b *testing.B) {
		measure(b, func() {
			res, err := e.Emit(context.Background())
			if err != nil || res.Entities != n {
				b.Fatalf("emit: %d entities, %v", res.Entities, err)
			}
		})
	})
	b.Run("bare-scan", func(b *testing.B) {
		measure(b, func() {
			count := 0
			err := st.Scan(context.Background(), func(store.Entry, error) error { count++; return nil })
			if err != nil || count != n {
				b.Fatalf("scan: %d records, %v", count, err)
			}
		})
	})
	b.Run("bare-export", func(b *testing.B) {
		measure(b, func() {
			em := tel.NewEmission()
			for _, sm := range batches {
				if err := em.Export(context.Background(), sm); err != nil {
					b.Fatal(err)
				}
			}
			em.Commit()
		})
	})
}

// prebuiltBatches are the points of n entities, as the emitter sends them, built ahead.
func prebuiltBatches(n, batchPoints int) []metricdata.ScopeMetrics {
	now := time.Now()
	states := make([]attribute.KeyValue, len(domain.States))
	for i, s := range domain.States {
		states[i] = attribute.String(emitter.AttrState, s.MetricValue())
	}
	var out []metricdata.ScopeMetrics
	var dps []metricdata.DataPoint[int64]
	flush := func() {
		out = append(out, metricdata.ScopeMetrics{
			Scope:   instrumentation.Scope{Name: emitter.ScopeName},
			Metrics: []metricdata.Metrics{{Name: emitter.MetricStatus, Unit: "1", Data: metricdata.Gauge[int64]{DataPoints: dps}}},
		})
		dps = nil
	}
	for i := 0; i < n; i++ {
		if len(dps)+len(states) > batchPoints {
			flush()
		}
		id := attribute.String(emitter.AttrResourceID, fleetID(i))
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

// measure runs op b.N times and reports its peak heap and RSS, the highest over the runs.
func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	var peakHeap, peakRSS uint64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := heapObjects()
		resetPeakRSS()
		stop := sampleHeap()
		b.StartTimer()
		op()
		b.StopTimer()
		heap := stop()
		if heap > base {
			peakHeap = max(peakHeap, heap-base)
		}
		peakRSS = max(peakRSS, rssPeak())
		b.StartTimer()
	}
	b.ReportMetric(float64(peakHeap)/1e6, "peak-heap-MB")
	if peakRSS > 0 {
		b.ReportMetric(float64(peakRSS)/1e6, "peak-rss-MB")
	}
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap samples the live heap every millisecond until the returned stop, which gives
// the highest sample.
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

// resetPeakRSS resets the kernel's high-water mark of the process's RSS (Linux; a no-op
// elsewhere), so that rssPeak reports the peak of one operation.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rssPeak is VmHWM in bytes, 0 where unknown.
func rssPeak() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
