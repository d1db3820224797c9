package telemetry

import (
	"errors"
	"testing"
	"time"
)

func TestReadTarget_AsTheExportersReadTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		mode    Mode
		env     map[string]string
		url     string
		headers map[string]string
		gzip    bool
		timeout time.Duration
	}{
		{name: "base endpoint over HTTP gets the signal path", mode: ModeOTLPHTTP,
			env: map[string]string{EnvEndpoint: "http://c:4318/base/"}, url: "http://c:4318/base/v1/metrics", gzip: true, timeout: 10 * time.Second},
		{name: "metrics endpoint is used as it is", mode: ModeOTLPHTTP,
			env: map[string]string{EnvEndpoint: "http://ignored:1", EnvMetricsEndpoint: "http://c:4318/custom"}, url: "http://c:4318/custom", gzip: true, timeout: 10 * time.Second},
		{name: "the flag's endpoint is a base URL", mode: ModeOTLPHTTP, cfg: Config{Endpoint: "http://flag:4318"},
			env: map[string]string{EnvMetricsEndpoint: "http://ignored:1/x"}, url: "http://flag:4318/v1/metrics", gzip: true, timeout: 10 * time.Second},
		{name: "gRPC keeps the endpoint", mode: ModeOTLPGRPC,
			env: map[string]string{EnvEndpoint: "http://c:4317"}, url: "http://c:4317", gzip: true, timeout: 10 * time.Second},
		{name: "headers, metrics-specific first, values unescaped", mode: ModeOTLPGRPC,
			env: map[string]string{EnvEndpoint: "http://c:4317", "OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_METRICS_HEADERS": "Api-Key=s%20ecret, tenant = t1 ,broken"},
			url: "http://c:4317", headers: map[string]string{"api-key": "s ecret", "tenant": "t1"}, gzip: true, timeout: 10 * time.Second},
		{name: "compression none and a timeout", mode: ModeOTLPGRPC,
			env: map[string]string{EnvEndpoint: "http://c:4317", "OTEL_EXPORTER_OTLP_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "2500"},
			url: "http://c:4317", gzip: false, timeout: 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTLPEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := readTarget(tc.cfg, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if got.url.String() != tc.url || got.compress != tc.gzip || got.timeout != tc.timeout {
				t.Errorf("url %s, gzip %v, timeout %s; want %s, %v, %s", got.url, got.compress, got.timeout, tc.url, tc.gzip, tc.timeout)
			}
			if tc.headers == nil {
				tc.headers = map[string]string{}
			}
			if len(got.headers) != len(tc.headers) {
				t.Errorf("headers %v, want %v", got.headers, tc.headers)
			}
			for k, v := range tc.headers {
				if got.headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, got.headers[k], v)
				}
			}
		})
	}
}

func TestReadTarget_RefusesWhatItCannotHonour(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"compression":      {EnvEndpoint: "http://c:1", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"timeout":          {EnvEndpoint: "http://c:1", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		"CA file":          {EnvEndpoint: "https://c:1", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
		"client key alone": {EnvEndpoint: "https://c:1", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/nonexistent/key.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			clearOTLPEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			if _, err := readTarget(Config{}, ModeOTLPGRPC); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func clearOTLPEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{EnvEndpoint, EnvMetricsEndpoint} {
		t.Setenv(k, "")
	}
	for _, name := range []string{"HEADERS", "COMPRESSION", "TIMEOUT", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+name, "")
		t.Setenv("OTEL_EXPORTER_OTLP_METRICS_"+name, "")
	}
}
