package main

import (
	"context"
	"errors"
	"fmt"
	"maintsignals/infra/provision"
	"maintsignals/shared/admin"
	"maintsignals/shared/function"
	"maintsignals/shared/natsconn"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) functionCommand() *cobra.Command {
	var (
		metricsListen string
		adminListen   string
		emit          emitFlags
	)
	names := make([]string, 0, len(functions))
	var about strings.Builder
	for _, f := range functions {
		names = append(names, f.name)
		fmt.Fprintf(&about, "  %-8s %s\n", f.name, f.about)
	}
	sort.Strings(names)
	c := &cobra.Command{
		Use:   "function [flags] NAME",
		Short: "Run one function against an existing NATS (for deployment)",
		Long: `Run one function against the NATS server or cluster at --server (or NATS_URL; a
comma-separated list for a cluster) until SIGTERM or Ctrl-C, then drain and exit 0. Run any
number of replicas: commands for one entity are still applied in order, and each tick is
served once. The streams must be provisioned first (` + "`maintctl provision`" + `).

Functions:
` + about.String() + `
Metrics go over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise to a Prometheus page
at --metrics-listen, if given.

Against a secured NATS (the configurations of infra/nats), connect as a user of the function
role: --nkey FILE (or --creds FILE), --inbox-prefix _INBOX_function, and --tlsca FILE (plus
--tlscert/--tlskey for mutual TLS); or NATS_NKEY, NATS_INBOX_PREFIX, NATS_CA, ...`,
		Example: "  NATS_URL=nats://n1:4222,nats://n2:4222,nats://n3:4222 maintctl function command\n" +
			"  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 maintctl function emitter\n" +
			"  maintctl function command --server tls://nats.example:4222 --tlsca ca.pem --nkey command.nk --inbox-prefix _INBOX_function",
		ValidArgs: names,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("function needs one NAME: %s (see `%s --help`)", functionNames(), cmd.CommandPath())
			}
			if _, ok := findFunction(args[0]); !ok {
				return fmt.Errorf("unknown function %q: use one of %s", args[0], functionNames())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, _ := findFunction(args[0])
			if spec.run == nil {
				return fmt.Errorf("function %s is not available in this build yet", spec.name)
			}
			ctx := cmd.Context()
			// The admin endpoint comes first: liveness must answer while NATS is still being
			// reached, readiness says why the replica is not ready yet.
			var adm *admin.Server
			if adminListen != "" {
				status := function.NewStatus()
				ctx = function.WithStatus(ctx, status)
				var err error
				if adm, err = admin.Start(admin.Config{Listen: adminListen, Status: status, Logger: a.log}); err != nil {
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
			// The emitter bounds each run by the tick, so that a run never sends late what it
			// read long ago: `up` knows the tick; a lone function reads it from the schedule.
			var tick time.Duration
			if spec.name == "emitter" || spec.name == "notices" {
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				tick, err = provision.ScheduledTick(tctx, cl.JS)
				cancel()
				if err != nil {
					a.log.Warn("cannot read the tick interval; emitter runs are bounded by the default export timeout", "error", err)
					tick = 0
				}
			}
			tel, err := a.setupTelemetry(ctx, "maintsignals-"+spec.name, metricsListen, tick)
			if err != nil {
				return err
			}
			defer a.shutdownTelemetry(tel)
			if adm != nil {
				adm.SetMetrics(tel.PrometheusHandler())
			}
			a.log.Info("function starting", "function", spec.name, "server", cl.NC.ConnectedUrlRedacted(), "metrics", metricsWhere(tel, a.env), "tick", tick)
			err = a.runFunctions(ctx, []functionSpec{spec}, functionEnv{js: cl.JS, tel: tel, a: a, tick: tick, emit: emit}, func([]string) {})
			if err == nil {
				a.log.Info("function stopped", "function", spec.name)
			}
			return err
		},
	}
	c.Flags().StringVar(&metricsListen, "metrics-listen", "", "host:port of a Prometheus page when no OTLP endpoint is set (default: none; the page is also served on --admin-listen)")
	c.Flags().StringVar(&adminListen, "admin-listen", "", "host:port of the health endpoints, e.g. :8081: /livez (alive; never checks NATS), /readyz (connected, consumers found, not draining; else 503), /metrics (with --metrics-listen)")
	addEmitFlags(c, &emit)
	return c
}

// connectRetry connects to --server with the credentials and TLS of the flags, retrying until
// ctx ends: a function may start before its NATS server does. Options that cannot work (a
// missing file, a bad inbox prefix) fail at once.
func (a *app) connectRetry(ctx context.Context) (*natsconn.Conn, error) {
	delay := time.Second
	for {
		conn, err := natsconn.Connect(ctx, a.natsOptions("maintctl-function", 0))
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
