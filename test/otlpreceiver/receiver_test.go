package otlpreceiver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// exporter builds a real OTLP exporter to r, without retries so failures show at once.
func exporter(t *testing.T, r *otlpreceiver.Receiver, protocol string, gzip bool) sdkmetric.Exporter {
	t.Helper()
	ctx := context.Background()
	var (
		exp sdkmetric.Exporter
		err error
	)
	if protocol == otlpreceiver.GRPC {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpointURL(r.GRPCEndpoint()), otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{})}
		if gzip {
			opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	} else {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(r.HTTPMetricsURL()), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{})}
		if gzip {
			opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	return exp
}

// data is a request with a gauge of n points, a counter and a histogram.
func data(n int) *metricdata.ResourceMetrics {
	now := time.Now()
	gauge := make([]metricdata.DataPoint[int64], n)
	for i := range gauge {
		gauge[i] = metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(attribute.String("entity", fmt.Sprintf("/subscriptions/s/resourceGroups/rg/providers/x/c%06d", i))),
			Time:       now,
			Value:      int64(i % 2),
		}
	}
	return &metricdata.ResourceMetrics{
		Resource: resource.NewSchemaless(attribute.String("service.name", "receiver-test")),
		ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{
			{Name: "test.gauge", Unit: "1", Data: metricdata.Gauge[int64]{DataPoints: gauge}},
			{Name: "test.runs", Data: metricdata.Sum[int64]{
				Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
				DataPoints: []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(attribute.String("outcome", "success")), Time: now, Value: 3}},
			}},
			{Name: "test.duration", Unit: "s", Data: metricdata.Histogram[float64]{
				Temporality: metricdata.CumulativeTemporality,
				DataPoints: []metricdata.HistogramDataPoint[float64]{{
					Attributes: attribute.NewSet(), Time: now, Count: 2, Sum: 1.5,
					Bounds: []float64{1}, BucketCounts: []uint64{1, 1},
				}},
			}},
		}}},
	}
}

func TestReceiver_DecodesAndMeasuresEveryExport(t *testing.T) {
	tests := []struct {
		protocol string
		gzip     bool
	}{
		{otlpreceiver.GRPC, true},
		{otlpreceiver.GRPC, false},
		{otlpreceiver.HTTP, true},
		{otlpreceiver.HTTP, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s gzip=%v", tt.protocol, tt.gzip), func(t *testing.T) {
			r := otlpreceiver.Start(t)
			exp := exporter(t, r, tt.protocol, tt.gzip)
			if err := exp.Export(testenv.Context(t, 5*time.Second), data(200)); err != nil {
				t.Fatalf("export: %v", err)
			}
			exports := r.Exports()
			if len(exports) != 1 {
				t.Fatalf("%d exports recorded, want 1", len(exports))
			}
			e := exports[0]
			if e.Seq != 1 || e.Protocol != tt.protocol || e.DataPoints != 202 {
				t.Errorf("export = seq %d protocol %q points %d, want 1 %q 202", e.Seq, e.Protocol, e.DataPoints, tt.protocol)
			}
			wantEnc := ""
			if tt.gzip {
				wantEnc = "gzip"
			}
			if e.Encoding != wantEnc {
				t.Errorf("encoding %q, want %q", e.Encoding, wantEnc)
			}
			switch {
			case tt.gzip && e.WireSize*3 > e.Size:
				t.Errorf("gzip wire size %d of %d bytes: not compressed", e.WireSize, e.Size)
			case !tt.gzip && e.WireSize != e.Size:
				t.Errorf("plain wire size %d, want the message size %d", e.WireSize, e.Size)
			}
			if got := e.Find("test.gauge", map[string]string{"entity": "/subscriptions/s/resourceGroups/rg/providers/x/c000001"}); len(got) != 1 || got[0].Value != 1 || got[0].Type != otlpreceiver.Gauge || got[0].Unit != "1" {
				t.Errorf("gauge point c000001 = %v", got)
			}
			if got := e.Find("test.runs", map[string]string{"outcome": "success"}); len(got) != 1 || got[0].Value != 3 || !got[0].Monotonic {
				t.Errorf("counter point = %v", got)
			}
			if got := e.Find("test.duration", nil); len(got) != 1 || got[0].Count != 2 || got[0].Sum != 1.5 {
				t.Errorf("histogram point = %v", got)
			}
			if p := r.Points()[0]; p.Resource["service.name"] != "receiver-test" {
				t.Errorf("resource = %v", p.Resource)
			}
		})
	}
}

func TestReceiver_StopFailsExportsUntilRestart(t *testing.T) {
	for _, protocol := range []string{otlpreceiver.GRPC, otlpreceiver.HTTP} {
		t.Run(protocol, func(t *testing.T) {
			r := otlpreceiver.Start(t)
			exp := exporter(t, r, protocol, true)
			if err := exp.Export(testenv.Context(t, 5*time.Second), data(1)); err != nil {
				t.Fatalf("export before stop: %v", err)
			}
			r.Stop()
			if err := exp.Export(testenv.Context(t, time.Second), data(1)); err == nil {
				t.Fatal("export to a stopped receiver succeeded")
			}
			if err := r.Restart(); err != nil {
				t.Fatal(err)
			}
			// gRPC reconnects with backoff: allow a few attempts.
			deadline := time.Now().Add(5 * time.Second)
			for {
				err := exp.Export(testenv.Context(t, time.Second), data(1))
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("export after restart: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if n := r.Len(); n != 2 {
				t.Errorf("%d exports recorded, want 2", n)
			}
		})
	}
}

func TestReceiver_GRPCRefusesRequestsOver4MiB(t *testing.T) {
	r := otlpreceiver.Start(t)
	exp := exporter(t, r, otlpreceiver.GRPC, true)
	// ~75 bytes of attribute value per point: 80k points are well over 4 MiB uncompressed,
	// though far less once gzipped; the limit applies to the decompressed message.
	err := exp.Export(testenv.Context(t, 10*time.Second), data(80000))
	if err == nil || !strings.Contains(err.Error(), "ResourceExhausted") {
		t.Fatalf("export of an oversized request: err = %v, want ResourceExhausted", err)
	}
	if r.Len() != 0 {
		t.Errorf("oversized request recorded")
	}
}

func TestReceiver_SlowReceiverTimesOutClient(t *testing.T) {
	for _, protocol := range []string{otlpreceiver.GRPC, otlpreceiver.HTTP} {
		t.Run(protocol, func(t *testing.T) {
			r := otlpreceiver.Start(t)
			r.SetDelay(2 * time.Second)
			exp := exporter(t, r, protocol, true)
			start := time.Now()
			if err := exp.Export(testenv.Context(t, 200*time.Millisecond), data(1)); err == nil {
				t.Fatal("export to a slow receiver met a shorter deadline")
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("export returned after %s, want about the 200ms deadline", d)
			}
			r.SetDelay(0)
			if err := exp.Export(testenv.Context(t, 5*time.Second), data(1)); err != nil {
				t.Fatalf("export after the delay ended: %v", err)
			}
		})
	}
}

func TestReceiver_AwaitWaitsForAMatchingExport(t *testing.T) {
	r := otlpreceiver.Start(t)
	exp := exporter(t, r, otlpreceiver.GRPC, false)
	if err := exp.Export(testenv.Context(t, 5*time.Second), data(1)); err != nil {
		t.Fatal(err)
	}
	after := r.Len()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = exp.Export(context.Background(), data(3))
	}()
	e, err := r.Await(testenv.Context(t, 5*time.Second), after, func(e otlpreceiver.Export) bool { return e.Has("test.gauge") })
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 2 || e.DataPoints != 5 {
		t.Errorf("awaited export seq %d with %d points, want seq 2 with 5", e.Seq, e.DataPoints)
	}
	if _, err := r.Await(testenv.Context(t, 100*time.Millisecond), e.Seq, nil); err == nil {
		t.Error("Await returned an export that never came")
	}
}

func TestReceiver_CountsEachTicksDistinctValues(t *testing.T) {
	r := otlpreceiver.Start(t, otlpreceiver.WithoutPayloads(), otlpreceiver.WithTickCounts("m", "id", 2))
	exp := exporter(t, r, otlpreceiver.GRPC, true)
	ctx := testenv.Context(t, 10*time.Second)
	send := func(at time.Time, ids ...string) {
		dps := make([]metricdata.DataPoint[int64], 0, 2*len(ids))
		for _, id := range ids {
			dps = append(dps,
				metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("id", id), attribute.String("s", "a")), Time: at, Value: 1},
				metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String("id", id), attribute.String("s", "b")), Time: at, Value: 0})
		}
		rm := &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{{Name: "m", Data: metricdata.Gauge[int64]{DataPoints: dps}}}}}}
		if err := exp.Export(ctx, rm); err != nil {
			t.Fatal(err)
		}
	}
	t1, t2, t3 := time.Unix(100, 0), time.Unix(200, 0), time.Unix(300, 0)
	send(t1, "a", "b")
	send(t2, "a", "b")
	send(t2, "c", "a") // a twice in tick 2
	send(t3, "c")
	got := r.TickCounts()
	want := []otlpreceiver.TickCount{{At: t2, Distinct: 3, Duplicates: 1, Requests: 2}, {At: t3, Distinct: 1, Requests: 1}}
	if len(got) != len(want) {
		t.Fatalf("ticks %+v, want the last two %+v", got, want)
	}
	for i := range want {
		if !got[i].At.Equal(want[i].At) || got[i].Distinct != want[i].Distinct || got[i].Duplicates != want[i].Duplicates || got[i].Requests != want[i].Requests {
			t.Errorf("tick %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := r.SeenSince(t2); n != 3 {
		t.Errorf("seen since tick 2: %d, want 3", n)
	}
	if n := r.SeenSince(t3); n != 1 {
		t.Errorf("seen since tick 3: %d, want 1", n)
	}
	if got := r.TickValues(t2); len(got) != 3 || !got["a"] || !got["b"] || !got["c"] {
		t.Errorf("values of tick 2: %v, want a, b and c", got)
	}
	if got := r.TickValues(t1); got != nil {
		t.Errorf("values of tick 1, no longer kept: %v, want none", got)
	}
}

func TestReceiver_WithoutDecodingRecordsSizesOnly(t *testing.T) {
	r := otlpreceiver.Start(t, otlpreceiver.WithoutDecoding())
	exp := exporter(t, r, otlpreceiver.GRPC, true)
	if err := exp.Export(testenv.Context(t, 10*time.Second), data(100)); err != nil {
		t.Fatal(err)
	}
	ex := r.Exports()
	if len(ex) != 1 || ex[0].Size < 100 || ex[0].WireSize == 0 || ex[0].Encoding != "gzip" || ex[0].DataPoints != 0 || ex[0].Request != nil {
		t.Fatalf("exports %+v, want one request with its sizes and nothing decoded", ex)
	}
}
