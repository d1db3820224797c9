package main

import (
	"context"
	"errors"
	"fmt"
	"maintsignals/shared/telemetry"
	"net"
	"time"
)

// setupTelemetry sets up metrics export from the OTEL_* environment, or a Prometheus page at
// metricsListen. With the tick known (> 0), a collector that comes back is reconnected to
// within half a tick, so that the next emission reaches it (gRPC's reconnect backoff would
// otherwise wait up to telemetry.DefaultReconnectMaxDelay).
func (a *app) setupTelemetry(ctx context.Context, service, metricsListen string, tick time.Duration) (*telemetry.Telemetry, error) {
	cfg := telemetry.Config{ServiceName: service, PrometheusListen: metricsListen, Logger: a.log}
	if tick > 0 {
		cfg.ReconnectMaxDelay = min(telemetry.DefaultReconnectMaxDelay, tick/2)
	}
	tel, err := telemetry.Setup(ctx, cfg)
	if err != nil {
		var opErr *net.OpError
		if metricsListen != "" && errors.As(err, &opErr) && opErr.Op == "listen" {
			return nil, fmt.Errorf("%w (use --metrics-listen with another address, or \"\" for no metrics page)", err)
		}
		return nil, err
	}
	return tel, nil
}

func (a *app) shutdownTelemetry(tel *telemetry.Telemetry) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		a.log.Warn("telemetry shutdown", "error", err)
	}
}

// metricsWhere says where metrics go, for people.
func metricsWhere(tel *telemetry.Telemetry, env func(string) string) string {
	switch tel.Mode() {
	case telemetry.ModeOTLPGRPC, telemetry.ModeOTLPHTTP:
		ep := env(telemetry.EnvMetricsEndpoint)
		if ep == "" {
			ep = env(telemetry.EnvEndpoint)
		}
		return fmt.Sprintf("OTLP %s to %s", tel.Mode(), ep)
	case telemetry.ModePrometheus:
		return fmt.Sprintf("http://%s%s (Prometheus format; set OTEL_EXPORTER_OTLP_ENDPOINT to export OTLP)", tel.PrometheusAddr(), telemetry.PrometheusPath)
	default:
		return "not exported (set OTEL_EXPORTER_OTLP_ENDPOINT, or --metrics-listen for a Prometheus page)"
	}
}
