// Package telemetry sets up OpenTelemetry metrics for a function: the resource from the
// environment, an exporter chosen from the OTLP environment variables (gRPC or HTTP, gzip),
// or, without an endpoint, a Prometheus-format page a person can read.
//
// Two paths leave the process:
//   - SDK instruments (Meter) are collected by a periodic reader, in batches.
//   - Points built outside the SDK (the emitter's per-entity state, see Emission) are built by
//     their caller as OTLP requests and sent on a client of their own, when the caller says
//     so. Nothing of them is kept between emissions, so a state that no longer holds is never
//     sent again.
package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Environment variables read here. The OTLP exporters read the endpoint, headers, TLS,
// compression and timeout variables themselves; they do not read the protocol.
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvMetricsProtocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL that are supported.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Mode is where metrics go.
type Mode string

// Modes.
const (
	ModeOTLPGRPC   Mode = "otlp/grpc"
	ModeOTLPHTTP   Mode = "otlp/http"
	ModePrometheus Mode = "prometheus"
	ModeNone       Mode = "none"
)

// Defaults.
const (
	DefaultServiceName        = "maintsignals"
	DefaultMaxExportBatchSize = 10000
	DefaultReconnectMaxDelay  = 5 * time.Second
	// PrometheusPath is where the Prometheus-format page is served.
	PrometheusPath = "/metrics"
)

// Errors.
var (
	ErrInvalidConfig       = errors.New("invalid telemetry config")
	ErrUnsupportedProtocol = errors.New("unsupported OTLP protocol")
	ErrUnsupportedExporter = errors.New("unsupported metrics exporter")
)

// Config configures Setup. Zero fields take defaults.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set it.
	ServiceName string
	// Endpoint and Protocol override the OTLP environment variables when set (for flags).
	// Endpoint means what OTEL_EXPORTER_OTLP_ENDPOINT means: a URL with scheme
	// (http://host:4317 is plaintext); over HTTP, /v1/metrics is appended to its path.
	Endpoint string
	Protocol string
	// Interval between collections of the SDK instruments (0: OTEL_METRIC_EXPORT_INTERVAL,
	// else 60s). Timeout bounds one collection and export (0: OTEL_METRIC_EXPORT_TIMEOUT,
	// else 30s).
	Interval time.Duration
	Timeout  time.Duration
	// MaxExportBatchSize bounds the data points of one request of the periodic reader
	// (default 10000) so that no request outgrows a collector's 4 MiB limit.
	MaxExportBatchSize int
	// ReconnectMaxDelay caps the gRPC reconnect backoff (default 5s): a collector that comes
	// back is used within this delay, not after gRPC's default of up to two minutes.
	ReconnectMaxDelay time.Duration
	// PrometheusListen is host:port of a Prometheus-format page (path /metrics), served
	// only when no OTLP endpoint is configured; "" serves none.
	PrometheusListen string
	Logger           *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Interval < 0, c.Timeout < 0, c.ReconnectMaxDelay < 0:
		return c, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxExportBatchSize < 0:
		return c, fmt.Errorf("%w: negative MaxExportBatchSize", ErrInvalidConfig)
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.MaxExportBatchSize == 0 {
		c.MaxExportBatchSize = DefaultMaxExportBatchSize
	}
	if c.ReconnectMaxDelay == 0 {
		c.ReconnectMaxDelay = DefaultReconnectMaxDelay
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Telemetry is a configured meter provider and what it exports to.
type Telemetry struct {
	mp       *sdkmetric.MeterProvider
	res      *resource.Resource
	fleetRes *resource.Resource
	mode     Mode
	// push sends emissions (OTLP), built by their caller as OTLP requests. It is not the
	// periodic reader's exporter: an SDK exporter holds a lock for a whole export including
	// its retries, so sharing one would let a slow periodic export hold up an emission past
	// its deadline.
	push        pusher
	fleetPB     *resourcepb.Resource
	snapshot    *snapshot
	promSrv     *http.Server
	promAddr    string
	promHandler http.Handler
	log         *slog.Logger
}

// Setup builds the meter provider. Without an OTLP endpoint and without PrometheusListen,
// instruments record into nothing (mode none).
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Telemetry{log: cfg.Logger}
	if t.res, t.fleetRes, err = buildResource(ctx, cfg.ServiceName); err != nil {
		return nil, err
	}
	if t.mode, err = chooseMode(cfg); err != nil {
		return nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(t.res)}
	switch t.mode {
	case ModeOTLPGRPC, ModeOTLPHTTP:
		if t.push, err = newPusher(cfg, t.mode); err != nil {
			return nil, err
		}
		exp, err := t.newOTLPExporter(ctx, cfg)
		if err != nil {
			_ = t.push.close()
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithInterval(cfg.Interval),
			sdkmetric.WithTimeout(cfg.Timeout),
			sdkmetric.WithMaxExportBatchSize(cfg.MaxExportBatchSize))))
	case ModePrometheus:
		reader, err := t.startPrometheus(cfg.PrometheusListen)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(reader))
	}
	t.fleetPB = resourceProto(t.fleetRes.Attributes())
	t.mp = sdkmetric.NewMeterProvider(opts...)
	if err := registerRuntime(t.mp); err != nil {
		return nil, err
	}
	t.log.Info("telemetry ready", "mode", string(t.mode), "service", serviceName(t.res), "prometheus", t.promAddr)
	return t, nil
}

// chooseMode honours OTEL_METRICS_EXPORTER (otlp, prometheus, none), then picks OTLP when an
// endpoint is set (Config first, then the metrics-specific variable, then the general one),
// else the Prometheus page when it has an address, else nothing.
func chooseMode(cfg Config) (Mode, error) {
	switch exp := strings.TrimSpace(os.Getenv(EnvMetricsExporter)); exp {
	case "", "otlp":
	case "none":
		return ModeNone, nil
	case "prometheus":
		if cfg.PrometheusListen == "" {
			return "", fmt.Errorf("%w: %s=prometheus needs a listen address", ErrInvalidConfig, EnvMetricsExporter)
		}
		return ModePrometheus, nil
	default:
		return "", fmt.Errorf("%w: %s=%q (otlp, prometheus or none)", ErrUnsupportedExporter, EnvMetricsExporter, exp)
	}
	endpoint := firstNonEmpty(cfg.Endpoint, os.Getenv(EnvMetricsEndpoint), os.Getenv(EnvEndpoint))
	if endpoint == "" {
		if cfg.PrometheusListen != "" {
			return ModePrometheus, nil
		}
		return ModeNone, nil
	}
	// The exporters take an endpoint without a scheme and then silently export nothing.
	if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return "", fmt.Errorf("%w: OTLP endpoint %q needs a scheme: http://%s (plaintext) or https://%s", ErrInvalidConfig, endpoint, endpoint, endpoint)
	}
	switch p := firstNonEmpty(cfg.Protocol, os.Getenv(EnvMetricsProtocol), os.Getenv(EnvProtocol), ProtocolGRPC); p {
	case ProtocolGRPC:
		return ModeOTLPGRPC, nil
	case ProtocolHTTP:
		return ModeOTLPHTTP, nil
	default:
		return "", fmt.Errorf("%w: %q (grpc or http/protobuf)", ErrUnsupportedProtocol, p)
	}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// newOTLPExporter builds an exporter that reads its endpoint, headers, TLS and timeout from
// the environment.
func (t *Telemetry) newOTLPExporter(ctx context.Context, cfg Config) (sdkmetric.Exporter, error) {
	if t.mode == ModeOTLPGRPC {
		opts := []otlpmetricgrpc.Option{
			otlpmetricgrpc.WithCompressor("gzip"),
			otlpmetricgrpc.WithDialOption(grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  min(time.Second, cfg.ReconnectMaxDelay),
					Multiplier: backoff.DefaultConfig.Multiplier,
					Jitter:     backoff.DefaultConfig.Jitter,
					MaxDelay:   cfg.ReconnectMaxDelay,
				},
				MinConnectTimeout: 5 * time.Second,
			})),
		}
		if cfg.Endpoint != "" {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err := otlpmetricgrpc.New(ctx, append(opts, otlpmetricgrpc.WithRetry(quickRetry))...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP gRPC exporter: %w", err)
		}
		return exp, nil
	}
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression)}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%w: endpoint %q: %w", ErrInvalidConfig, cfg.Endpoint, err)
		}
		// A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT: the signal's path is appended.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/metrics"
		opts = append(opts, otlpmetrichttp.WithEndpointURL(u.String()))
	}
	exp, err := otlpmetrichttp.New(ctx, append(opts, otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig(quickRetry)))...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP HTTP exporter: %w", err)
	}
	return exp, nil
}

// newPusher is the client of emissions for an OTLP mode.
func newPusher(cfg Config, mode Mode) (pusher, error) {
	t, err := readTarget(cfg, mode)
	if err != nil {
		return nil, err
	}
	if mode == ModeOTLPGRPC {
		return newGRPCPusher(t, cfg.ReconnectMaxDelay)
	}
	return newHTTPPusher(t), nil
}

// quickRetry retries transient failures (collector restarting, throttling) within a few
// seconds rather than the exporters' default 5s-and-doubling, so that exports resume soon
// after a collector comes back; the caller's deadline (an emission's, or the periodic
// reader's timeout), not an elapsed-time limit, ends the attempts.
var quickRetry = otlpmetricgrpc.RetryConfig{
	Enabled:         true,
	InitialInterval: 250 * time.Millisecond,
	MaxInterval:     2 * time.Second,
	MaxElapsedTime:  0,
}

func (t *Telemetry) startPrometheus(listen string) (sdkmetric.Reader, error) {
	reg := prometheus.NewRegistry()
	t.snapshot = &snapshot{}
	reader, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithProducer(t.snapshot),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus listen %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	t.promHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(t.log.Handler(), slog.LevelWarn),
	})
	mux.Handle(PrometheusPath, t.promHandler)
	t.promSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	t.promAddr = ln.Addr().String()
	go func() {
		if err := t.promSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.log.Error("prometheus endpoint stopped", "addr", t.promAddr, "err", err)
		}
	}()
	return reader, nil
}

// buildResource merges, lowest precedence first: the SDK's own attributes, the default
// service name and a fresh service.instance.id, then OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME. The fleet resource is the same without service.instance.id.
func buildResource(ctx context.Context, serviceName string) (*resource.Resource, *resource.Resource, error) {
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry) still carries the rest.
	base := resource.NewSchemaless(
		attribute.String("service.name", serviceName),
		// Replicas must not share an identity, or their cumulative counters would collide.
		attribute.String("service.instance.id", rand.Text()),
	)
	res, err := resource.Merge(base, env)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: merge resource: %w", err)
	}
	var fleet []attribute.KeyValue
	for _, kv := range res.Attributes() {
		if kv.Key != "service.instance.id" {
			fleet = append(fleet, kv)
		}
	}
	return res, resource.NewWithAttributes(res.SchemaURL(), fleet...), nil
}

func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value("service.name")
	return v.AsString()
}

// Meter returns a meter of the provider.
func (t *Telemetry) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return t.mp.Meter(name, opts...)
}

// MeterProvider is the provider, for libraries that take one.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// Mode reports where metrics go.
func (t *Telemetry) Mode() Mode { return t.mode }

// Resource is the process's resource (with its service.instance.id).
func (t *Telemetry) Resource() *resource.Resource { return t.res }

// FleetResource is the resource of emissions: the process's without service.instance.id, so
// that a series about an entity does not change identity with the replica that sent it.
func (t *Telemetry) FleetResource() *resource.Resource { return t.fleetRes }

// PrometheusAddr is the address of the Prometheus page ("" when none is served).
func (t *Telemetry) PrometheusAddr() string { return t.promAddr }

// PrometheusHandler serves the Prometheus page (nil unless the mode is Prometheus), so that
// another listener, such as a function's admin port, can serve it too.
func (t *Telemetry) PrometheusHandler() http.Handler { return t.promHandler }

// ForceFlush collects and exports the SDK instruments now.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if err := t.mp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("telemetry: flush: %w", err)
	}
	return nil
}

// Shutdown flushes what the instruments hold and stops exporting.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if err := t.mp.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if t.push != nil {
		if err := t.push.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if t.promSrv != nil {
		if err := t.promSrv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
