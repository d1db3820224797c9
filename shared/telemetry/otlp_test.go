package telemetry_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"maintsignals/shared/telemetry"
	"maintsignals/test/testenv"
)

// collector is an OTLP/HTTP endpoint whose answers a test scripts.
type collector struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter) // one per request; the last repeats
	headers []http.Header
	points  []int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(zr)
	var req colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	n := len(c.headers)
	c.headers = append(c.headers, r.Header.Clone())
	c.points = append(c.points, len(req.ResourceMetrics[0].ScopeMetrics[0].Metrics[0].GetGauge().DataPoints))
	answer := c.answers[min(n, len(c.answers)-1)]
	c.mu.Unlock()
	answer(w)
}

func ok(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) }

func TestEmission_HTTPSendsTheEnvironmentsHeadersAndRetriesWhatTheCollectorAsksTo(t *testing.T) {
	cleanEnv(t)
	c := &collector{answers: []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		ok,
	}}
	srv := httptest.NewServer(c)
	defer srv.Close()
	t.Setenv(telemetry.EnvEndpoint, srv.URL)
	t.Setenv(telemetry.EnvProtocol, telemetry.ProtocolHTTP)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret")
	tel := setup(t, telemetry.Config{Interval: time.Hour})
	start := time.Now()
	if err := tel.NewEmission("0", 0).Export(testenv.Context(t, 10*time.Second), gauge(start, "/a", "/b")); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.headers) != 2 || time.Since(start) < time.Second {
		t.Fatalf("%d requests in %s, want the 503 retried after its Retry-After of 1s", len(c.headers), time.Since(start))
	}
	for _, h := range c.headers {
		if h.Get("Api-Key") != "s3cret" || h.Get("Content-Type") != "application/x-protobuf" || h.Get("Content-Encoding") != "gzip" {
			t.Errorf("request headers %v", h)
		}
	}
	if c.points[1] != 2 {
		t.Errorf("retried request holds %d points, want 2", c.points[1])
	}
}

func TestEmission_RejectedPointsOrARefusalFailTheExport(t *testing.T) {
	partial, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{PartialSuccess: &colmetricpb.ExportMetricsPartialSuccess{RejectedDataPoints: 1, ErrorMessage: "bad point"}})
	for name, tc := range map[string]struct {
		answer func(http.ResponseWriter)
		want   error
	}{
		"partial success": {func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(partial)
		}, telemetry.ErrPartialSuccess},
		"bad request": {func(w http.ResponseWriter) { http.Error(w, "no", http.StatusBadRequest) }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			cleanEnv(t)
			c := &collector{answers: []func(http.ResponseWriter){tc.answer}}
			srv := httptest.NewServer(c)
			defer srv.Close()
			t.Setenv(telemetry.EnvEndpoint, srv.URL)
			t.Setenv(telemetry.EnvProtocol, telemetry.ProtocolHTTP)
			tel := setup(t, telemetry.Config{Interval: time.Hour})
			err := tel.NewEmission("0", 0).Export(testenv.Context(t, 10*time.Second), gauge(time.Now(), "/a"))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want a failure (%v)", err, tc.want)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.headers) != 1 {
				t.Errorf("%d requests, want 1: a refusal is not retried", len(c.headers))
			}
		})
	}
}

type headerService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	got chan metadata.MD
}

func (s *headerService) Export(ctx context.Context, _ *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.got <- md
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func TestEmission_GRPCSendsTheEnvironmentsHeaders(t *testing.T) {
	cleanEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &headerService{got: make(chan metadata.MD, 1)}
	gs := grpc.NewServer()
	colmetricpb.RegisterMetricsServiceServer(gs, svc)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv(telemetry.EnvEndpoint, "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "api-key=s3cret")
	tel := setup(t, telemetry.Config{Interval: time.Hour})
	if err := tel.NewEmission("0", 0).Export(testenv.Context(t, 10*time.Second), gauge(time.Now(), "/a")); err != nil {
		t.Fatal(err)
	}
	md := <-svc.got
	if got := md.Get("api-key"); len(got) != 1 || got[0] != "s3cret" {
		t.Errorf("metadata %v, want api-key s3cret", md)
	}
}
