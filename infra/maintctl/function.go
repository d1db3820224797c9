package main

import (
	"context"
	"errors"
	"fmt"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
	"maintsignals/shared/admin"
	"maintsignals/shared/function"
	"maintsignals/shared/natsconn"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// functionFlags are the flags of `maintctl function`, shared by every function.
type functionFlags struct {
	metricsListen string
	adminListen   string
}

func (a *app) functionCommand() *cobra.Command {
	var (
		f     functionFlags
		about strings.Builder
	)
	for _, fn := range registry.Functions() {
		fmt.Fprintf(&about, "  %-8s %s\n", fn.Name, fn.About)
	}
	c := &cobra.Command{
		Use:   "function NAME [flags]",
		Short: "Run one function against an existing NATS (for deployment)",
		Long: `Run one function against the NATS server or cluster at --server (or NATS_URL; a
comma-separated list for a cluster) until SIGTERM or Ctrl-C, then drain and exit 0. Run any
number of replicas: commands for one entity are still applied in order, and each tick is
served once. The streams must be provisioned first (` + "`maintctl provision`" + `).

Functions (` + "`maintctl function NAME --help`" + ` lists a function's own flags):
` + about.String() + `
Metrics go over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise to a Prometheus page
at --metrics-listen, if given.

Against a secured NATS (the configurations of infra/nats), connect as a user of the function
role: --nkey FILE (or --creds FILE), --inbox-prefix _INBOX_function, and --tlsca FILE (plus
--tlscert/--tlskey for mutual TLS); or NATS_NKEY, NATS_INBOX_PREFIX, NATS_CA, ...`,
		Example: "  NATS_URL=nats://n1:4222,nats://n2:4222,nats://n3:4222 maintctl function command\n" +
			"  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 maintctl function emitter\n" +
			"  maintctl function command --server tls://nats.example:4222 --tlsca ca.pem \\\n      --nkey command.nk --inbox-prefix _INBOX_function",
		// A missing or unknown NAME is refused here, not by cobra's text.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("function needs one NAME: %s (see `%s --help`)", registry.Names(), cmd.CommandPath())
			}
			return fmt.Errorf("unknown function %q: use one of %s", args[0], registry.Names())
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.PersistentFlags().StringVar(&f.metricsListen, "metrics-listen", "", "host:port of a Prometheus page when no OTLP endpoint is set (default: none; the page is also served on --admin-listen)")
	c.PersistentFlags().StringVar(&f.adminListen, "admin-listen", "", "host:port of the health endpoints, e.g. :8081: /livez (alive; never checks NATS), /readyz (connected, consumers found, not draining; else 503), /metrics (with --metrics-listen)")
	for _, fn := range registry.Functions() {
		c.AddCommand(a.oneFunctionCommand(fn, &f))
	}
	return c
}

// oneFunctionCommand is `maintctl function NAME`, with the function's own flags.
func (a *app) oneFunctionCommand(fn registry.Function, f *functionFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   fn.Name + " [flags]",
		Short: fn.About,
		Args:  noArgs,
	}
	bound := registry.Bind(c.Flags(), []registry.Function{fn})
	c.RunE = func(cmd *cobra.Command, _ []string) error { return a.runFunction(cmd.Context(), fn, bound, *f) }
	return c
}

// runFunction runs one function until ctx ends: the admin endpoint first (liveness must answer
// while NATS is still being reached, readiness says why the replica is not ready yet), then
// the connection, the tick interval when the tick drives it, and telemetry.
func (a *app) runFunction(ctx context.Context, fn registry.Function, bound *registry.Bound, f functionFlags) error {
	var adm *admin.Server
	if f.adminListen != "" {
		status := function.NewStatus()
		ctx = function.WithStatus(ctx, status)
		var err error
		if adm, err = admin.Start(admin.Config{Listen: f.adminListen, Status: status, Logger: a.log}); err != nil {
			return fmt.Errorf("--admin-listen: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = adm.Close(sctx)
		}()
		a.log.Info("admin endpoint listening", "addr", adm.Addr(), "paths", "/livez /readyz /metrics")
	}
	cl, err := a.connectRetry(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if adm != nil {
		adm.Attach(cl.NC, cl.JS)
	}
	// A tick-driven function bounds each run by the tick, so that a run never sends late what
	// it read long ago: `up` knows the tick; a lone function reads it from the schedule.
	var tick time.Duration
	if fn.Tick {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		tick, err = provision.ScheduledTick(tctx, cl.JS)
		cancel()
		if err != nil {
			a.log.Warn("cannot read the tick interval; runs are bounded by the default timeout", "function", fn.Name, "error", err)
			tick = 0
		}
	}
	tel, err := a.setupTelemetry(ctx, "maintsignals-"+fn.Name, f.metricsListen, tick)
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(tel)
	if adm != nil {
		adm.SetMetrics(tel.PrometheusHandler())
	}
	a.log.Info("function starting", "function", fn.Name, "server", cl.NC.ConnectedUrlRedacted(), "metrics", metricsWhere(tel, a.env), "tick", tick)
	err = bound.Run(ctx, registry.Env{JS: cl.JS, Tel: tel, Log: a.log, Tick: tick}, nil)
	if err == nil {
		a.log.Info("function stopped", "function", fn.Name)
	}
	return err
}

// connectRetry connects to --server with the credentials and TLS of the flags, retrying until
// ctx ends: a function may start before its NATS server does. Options that cannot work (a
// missing file, a bad inbox prefix) fail at once.
func (a *app) connectRetry(ctx context.Context) (*natsconn.Conn, error) {
	delay := time.Second
	o, err := a.natsOptions("maintctl-function", 0)
	if err != nil {
		return nil, err
	}
	for {
		conn, err := natsconn.Connect(ctx, o)
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, natsconn.ErrInvalidOptions) {
			return nil, err
		}
		a.log.Warn("cannot connect to NATS; retrying", "server", a.server, "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, connectAdvice(err, "is NATS running? set --server or NATS_URL")
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
