package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
	"maintsignals/test/testenv"
)

// cleanEnv unsets every variable Setup or the exporters read, so the host's environment
// cannot leak into a test.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		telemetry.EnvEndpoint, telemetry.EnvMetricsEndpoint, telemetry.EnvProtocol, telemetry.EnvMetricsProtocol,
		telemetry.EnvMetricsExporter, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT",
		"OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT",
	} {
		t.Setenv(k, "")
	}
}

func setup(t *testing.T, cfg telemetry.Config) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	})
	return tel
}

func count(t *testing.T, tel *telemetry.Telemetry, name string, attrs ...attribute.KeyValue) {
	t.Helper()
	c, err := tel.Meter("telemetry-test").Int64Counter(name)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1, metric.WithAttributes(attrs...))
}

func TestSetup_ExportsOverOTLPAsTheEnvironmentSays(t *testing.T) {
	tests := []struct {
		name     string
		env      func(r *otlpreceiver.Receiver) map[string]string
		mode     telemetry.Mode
		protocol string
	}{
		{
			name: "endpoint without protocol is gRPC",
			env: func(r *otlpreceiver.Receiver) map[string]string {
				return map[string]string{telemetry.EnvEndpoint: r.GRPCEndpoint()}
			},
			mode:     telemetry.ModeOTLPGRPC,
			protocol: otlpreceiver.GRPC,
		},
		{
			name: "protocol grpc",
			env: func(r *otlpreceiver.Receiver) map[string]string {
				return map[string]string{telemetry.EnvEndpoint: r.GRPCEndpoint(), telemetry.EnvProtocol: "grpc"}
			},
			mode:     telemetry.ModeOTLPGRPC,
			protocol: otlpreceiver.GRPC,
		},
		{
			name: "protocol http/protobuf",
			env: func(r *otlpreceiver.Receiver) map[string]string {
				return map[string]string{telemetry.EnvEndpoint: r.HTTPEndpoint(), telemetry.EnvProtocol: "http/protobuf"}
			},
			mode:     telemetry.ModeOTLPHTTP,
			protocol: otlpreceiver.HTTP,
		},
		{
			name: "metrics-specific variables win",
			env: func(r *otlpreceiver.Receiver) map[string]string {
				return map[string]string{
					telemetry.EnvEndpoint: "http://127.0.0.1:1", telemetry.EnvProtocol: "grpc",
					telemetry.EnvMetricsEndpoint: r.HTTPMetricsURL(), telemetry.EnvMetricsProtocol: "http/protobuf",
				}
			},
			mode:     telemetry.ModeOTLPHTTP,
			protocol: otlpreceiver.HTTP,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			r := otlpreceiver.Start(t)
			for k, v := range tt.env(r) {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_SERVICE_NAME", "emitter-test")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.name=overridden")
			tel := setup(t, telemetry.Config{})
			if tel.Mode() != tt.mode {
				t.Fatalf("mode %s, want %s", tel.Mode(), tt.mode)
			}
			count(t, tel, "test.calls", attribute.String("k", "v"))
			if err := tel.ForceFlush(testenv.Context(t, 5*time.Second)); err != nil {
				t.Fatalf("flush: %v", err)
			}
			e, err := r.Await(testenv.Context(t, 5*time.Second), 0, func(e otlpreceiver.Export) bool { return e.Has("test.calls") })
			if err != nil {
				t.Fatal(err)
			}
			if e.Protocol != tt.protocol || e.Encoding != "gzip" {
				t.Errorf("export over %s encoding %q, want %s gzip", e.Protocol, e.Encoding, tt.protocol)
			}
			p := e.Find("test.calls", map[string]string{"k": "v"})
			if len(p) != 1 || p[0].Value != 1 {
				t.Fatalf("points = %v", p)
			}
			res := p[0].Resource
			// OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES.
			if res["service.name"] != "emitter-test" || res["deployment.environment.name"] != "test" || res["service.instance.id"] == "" {
				t.Errorf("resource = %v", res)
			}
		})
	}
}

func TestSetup_ServiceNameDefaults(t *testing.T) {
	tests := []struct {
		name   string
		cfg    string
		envRes string
		want   string
	}{
		{name: "package default", want: telemetry.DefaultServiceName},
		{name: "config", cfg: "maint-emitter", want: "maint-emitter"},
		{name: "resource attributes win over config", cfg: "maint-emitter", envRes: "service.name=from-env", want: "from-env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tt.envRes)
			tel := setup(t, telemetry.Config{ServiceName: tt.cfg})
			v, _ := tel.Resource().Set().Value("service.name")
			if v.AsString() != tt.want {
				t.Errorf("service.name = %q, want %q", v.AsString(), tt.want)
			}
			if _, ok := tel.FleetResource().Set().Value("service.instance.id"); ok {
				t.Error("fleet resource carries service.instance.id")
			}
			if fv, _ := tel.FleetResource().Set().Value("service.name"); fv.AsString() != tt.want {
				t.Errorf("fleet service.name = %q, want %q", fv.AsString(), tt.want)
			}
		})
	}
}

func TestSetup_RefusesWhatItCannotHonour(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		cfg  telemetry.Config
		want error
	}{
		{name: "http/json", env: map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318", telemetry.EnvProtocol: "http/json"}, want: telemetry.ErrUnsupportedProtocol},
		{name: "unknown metrics protocol", env: map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318", telemetry.EnvMetricsProtocol: "udp"}, want: telemetry.ErrUnsupportedProtocol},
		{name: "console exporter", env: map[string]string{telemetry.EnvMetricsExporter: "console"}, want: telemetry.ErrUnsupportedExporter},
		{name: "prometheus exporter without listen address", env: map[string]string{telemetry.EnvMetricsExporter: "prometheus"}, want: telemetry.ErrInvalidConfig},
		{name: "negative interval", cfg: telemetry.Config{Interval: -time.Second}, want: telemetry.ErrInvalidConfig},
		{name: "negative batch size", cfg: telemetry.Config{MaxExportBatchSize: -1}, want: telemetry.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := telemetry.Setup(context.Background(), tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Setup error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSetup_PeriodicReaderSplitsLargeCollections(t *testing.T) {
	cleanEnv(t)
	r := otlpreceiver.Start(t)
	r.SetEnv(t, otlpreceiver.GRPC)
	tel := setup(t, telemetry.Config{MaxExportBatchSize: 10, Interval: time.Hour})
	for i := 0; i < 25; i++ {
		count(t, tel, "test.series", attribute.Int("i", i))
	}
	if err := tel.ForceFlush(testenv.Context(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	total := 0
	for _, e := range r.Exports() {
		sizes = append(sizes, e.DataPoints)
		total += len(e.Find("test.series", nil))
	}
	if len(sizes) != 3 || total != 25 {
		t.Errorf("requests of %v points with %d series, want 3 requests of at most 10 with 25", sizes, total)
	}
}

// gauge builds one batch of an emission: a gauge point per entity.
func gauge(now time.Time, ids ...string) *metricpb.ScopeMetrics {
	dps := make([]*metricpb.NumberDataPoint, len(ids))
	for i, id := range ids {
		dps[i] = &metricpb.NumberDataPoint{
			Attributes:   []*commonpb.KeyValue{{Key: "cloud.resource_id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: id}}}},
			TimeUnixNano: uint64(now.UnixNano()),
			Value:        &metricpb.NumberDataPoint_AsInt{AsInt: 1},
		}
	}
	return &metricpb.ScopeMetrics{
		Scope:   &commonpb.InstrumentationScope{Name: "telemetry-test"},
		Metrics: []*metricpb.Metric{{Name: "test.status", Unit: "1", Data: &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: dps}}}},
	}
}

func TestEmission_SendsEachBatchAsItsOwnRequestWithTheFleetResource(t *testing.T) {
	for _, protocol := range []string{otlpreceiver.GRPC, otlpreceiver.HTTP} {
		t.Run(protocol, func(t *testing.T) {
			cleanEnv(t)
			r := otlpreceiver.Start(t)
			r.SetEnv(t, protocol)
			tel := setup(t, telemetry.Config{Interval: time.Hour})
			em := tel.NewEmission("0", 0)
			now := time.Now()
			for _, batch := range [][]string{{"/a", "/b"}, {"/c"}} {
				if err := em.Export(testenv.Context(t, 5*time.Second), gauge(now, batch...)); err != nil {
					t.Fatal(err)
				}
			}
			em.Commit()
			exports := r.Exports()
			if len(exports) != 2 {
				t.Fatalf("%d requests, want one per batch", len(exports))
			}
			for i, want := range []int{2, 1} {
				e := exports[i]
				if e.DataPoints != want || e.Encoding != "gzip" {
					t.Errorf("request %d: %d points, encoding %q; want %d, gzip", i, e.DataPoints, e.Encoding, want)
				}
				for _, p := range e.Points() {
					if _, ok := p.Resource["service.instance.id"]; ok || p.Resource["service.name"] != telemetry.DefaultServiceName {
						t.Errorf("resource of an emission = %v, want the fleet resource", p.Resource)
					}
				}
			}
		})
	}
}

func TestEmission_FailsWithinItsDeadlineWhenTheCollectorIsDown(t *testing.T) {
	for _, protocol := range []string{otlpreceiver.GRPC, otlpreceiver.HTTP} {
		t.Run(protocol, func(t *testing.T) {
			cleanEnv(t)
			r := otlpreceiver.Start(t)
			r.SetEnv(t, protocol)
			tel := setup(t, telemetry.Config{Interval: time.Hour, ReconnectMaxDelay: 200 * time.Millisecond})
			r.Stop()
			start := time.Now()
			if err := tel.NewEmission("0", 0).Export(testenv.Context(t, 500*time.Millisecond), gauge(start, "/a")); err == nil {
				t.Fatal("export to a stopped collector succeeded")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("failed export took %s, want about its 500ms deadline", d)
			}
			if err := r.Restart(); err != nil {
				t.Fatal(err)
			}
			// Back within about the reconnect delay, not gRPC's default backoff of minutes.
			deadline := time.Now().Add(3 * time.Second)
			for {
				err := tel.NewEmission("0", 0).Export(testenv.Context(t, 500*time.Millisecond), gauge(time.Now(), "/a"))
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("collector back, export still fails: %v", err)
				}
			}
		})
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + telemetry.PrometheusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	return string(b)
}

func TestSetup_WithoutEndpointServesAPrometheusPage(t *testing.T) {
	cleanEnv(t)
	tel := setup(t, telemetry.Config{PrometheusListen: "127.0.0.1:0"})
	if tel.Mode() != telemetry.ModePrometheus || tel.PrometheusAddr() == "" {
		t.Fatalf("mode %s at %q, want prometheus with an address", tel.Mode(), tel.PrometheusAddr())
	}
	count(t, tel, "test.calls")
	now := time.Now()

	em := tel.NewEmission("0", 0)
	for _, batch := range [][]string{{"/a"}, {"/b"}} {
		if err := em.Export(context.Background(), gauge(now, batch...)); err != nil {
			t.Fatal(err)
		}
	}
	if page := scrape(t, tel.PrometheusAddr()); strings.Contains(page, `cloud_resource_id="/a"`) {
		t.Error("points of an emission shown before it was committed")
	}
	em.Commit()
	page := scrape(t, tel.PrometheusAddr())
	for _, want := range []string{"test_calls_total", `test_status_ratio{cloud_resource_id="/a"`, `test_status_ratio{cloud_resource_id="/b"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s:\n%s", want, page)
		}
	}
	if n := strings.Count(page, "# TYPE test_status_ratio"); n != 1 {
		t.Errorf("metric family listed %d times, want once", n)
	}

	// The next emission of the part replaces the previous one entirely.
	em = tel.NewEmission("0", 0)
	if err := em.Export(context.Background(), gauge(now, "/c")); err != nil {
		t.Fatal(err)
	}
	em.Commit()
	page = scrape(t, tel.PrometheusAddr())
	if strings.Contains(page, `cloud_resource_id="/a"`) || !strings.Contains(page, `cloud_resource_id="/c"`) {
		t.Errorf("page after a second emission:\n%s", page)
	}

	// Another part (shard) is shown beside it, in the same metric family; a part past its
	// keep leaves the page.
	em = tel.NewEmission("1", 300*time.Millisecond)
	if err := em.Export(context.Background(), gauge(now, "/d")); err != nil {
		t.Fatal(err)
	}
	em.Commit()
	page = scrape(t, tel.PrometheusAddr())
	if !strings.Contains(page, `cloud_resource_id="/c"`) || !strings.Contains(page, `cloud_resource_id="/d"`) || strings.Count(page, "# TYPE test_status_ratio") != 1 {
		t.Errorf("page with two parts:\n%s", page)
	}
	time.Sleep(400 * time.Millisecond)
	if page = scrape(t, tel.PrometheusAddr()); strings.Contains(page, `cloud_resource_id="/d"`) || !strings.Contains(page, `cloud_resource_id="/c"`) {
		t.Errorf("page after part 1 expired:\n%s", page)
	}

	// An aborted emission shows nothing of its part rather than a state that may be stale.
	tel.NewEmission("0", 0).Abort()
	if page = scrape(t, tel.PrometheusAddr()); strings.Contains(page, "cloud_resource_id") {
		t.Errorf("page after an aborted emission still shows entities:\n%s", page)
	}
}

func TestSetup_WithNothingConfiguredExportsNothing(t *testing.T) {
	for _, env := range []map[string]string{nil, {telemetry.EnvMetricsExporter: "none", telemetry.EnvEndpoint: "http://127.0.0.1:1"}} {
		t.Run(fmt.Sprint(env), func(t *testing.T) {
			cleanEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			tel := setup(t, telemetry.Config{})
			if tel.Mode() != telemetry.ModeNone || tel.PrometheusAddr() != "" {
				t.Fatalf("mode %s at %q, want none", tel.Mode(), tel.PrometheusAddr())
			}
			count(t, tel, "test.calls")
			em := tel.NewEmission("0", 0)
			if err := em.Export(context.Background(), gauge(time.Now(), "/a")); err != nil {
				t.Errorf("emission without exporter: %v", err)
			}
			em.Commit()
			if err := tel.ForceFlush(testenv.Context(t, time.Second)); err != nil {
				t.Errorf("flush without exporter: %v", err)
			}
		})
	}
}

func TestSetup_RefusesAnEndpointWithoutScheme(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317")
	_, err := telemetry.Setup(context.Background(), telemetry.Config{})
	if !errors.Is(err, telemetry.ErrInvalidConfig) || !strings.Contains(err.Error(), "http://127.0.0.1:4317") {
		t.Fatalf("err = %v, want a refusal that shows the endpoint with a scheme", err)
	}
}
