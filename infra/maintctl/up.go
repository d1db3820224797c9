package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"maintsignals/infra/local"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
)

type upFlags struct {
	listen        string
	data          string
	tick          time.Duration
	nodes         int
	syncAlways    bool
	metricsListen string
	monitorListen string
	partitions    int
	shards        int
	inFlight      int
	eventsMaxAge  time.Duration
	// region and hub make up a region joined to a hub (README, Regions).
	region, hub string
	security    local.SecurityFiles
	// functions are every function, bound to their flags (the union of their flags).
	functions *registry.Bound
}

func (a *app) upCommand() *cobra.Command {
	var f upFlags
	c := &cobra.Command{
		Use:   "up [flags]",
		Short: "Run the whole stack on this machine until interrupted",
		Long: `Run the whole stack on this machine: an embedded NATS server with JetStream on disk under
--data, the streams, bucket, consumers and tick schedule provisioned, and every function
running (` + registry.Names() + `),
until Ctrl-C or SIGTERM. Then the functions drain and the server shuts down cleanly. Starting
again on the same --data keeps every record and event.

Metrics go over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._METRICS_ENDPOINT) is set, with
OTEL_EXPORTER_OTLP_PROTOCOL grpc (default) or http/protobuf; otherwise they are served as a
Prometheus page at --metrics-listen for people to read.

--nodes 3 (or 5) runs a JetStream cluster of that many embedded servers on loopback, all in
this one process, for local trials of replication and fail-over: every stream and the bucket
get as many replicas, and the functions connect in-process to one node and move to another when
theirs goes, as they would over a URL list. Electing the cluster's leader takes a few seconds
at each start. Ports, from the --listen port P: node i serves clients on P+i and routes on
P+100+i (4222-4224 and 4322-4324 by default); with port 0 they are free ports the first time,
then the same ones again. Node i keeps its store under --data/node-i, and --data/cluster.json
records the node count and ports, so that a restart on the same --data keeps every record on
the same addresses. Export the printed NATS_URL list for the admin verbs. A --data directory
holds either one server or a cluster of one size: start it again the same way.

By default the server has no authentication and no TLS: keep --listen on loopback. To open it
up, --tls-cert and --tls-key make it accept TLS only (clients connect to the printed tls://
address and trust its CA with --tlsca), and --tls-client-ca makes that mutual TLS. --users FILE
makes it accept only the users listed there (public nkeys), each with the permissions of its
role in infra/nats (operator, admin, updater, function, reader): an admin connects with
--nkey SEED --inbox-prefix _INBOX_admin, and a reader that tries to send a command is refused
at once. up's own connections (provisioning, the functions) then use throwaway keys made in
memory at each start; nothing is written to disk. In-process connections never use TLS.

With --nodes, every node gets the same --tls-cert, --tls-key, --tls-client-ca and --users (so
the certificate must name the --listen host, e.g. 127.0.0.1, for clients to verify any node),
and the routes between the nodes use mutual TLS as soon as either is given: each node presents a
certificate from a certificate authority that up makes in memory at each start, and accepts
only a peer with one. No route flag is needed: every node runs in this process, nothing is
written to disk, and no other process can join the cluster (a connection to a route port
without that certificate is refused). --tls-client-ca concerns clients only.`,
		Example: `  maintctl up
  maintctl up --listen 127.0.0.1:4333 --data /var/tmp/maint --tick 10s
  maintctl up --nodes 3 --data ./maint-cluster     # then: export NATS_URL=<the printed list>
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 maintctl up

  # TLS and users, reachable from other machines
  maintctl up --listen 0.0.0.0:4222 --tls-cert server.crt --tls-key server.key --users users.json
  maintctl up --nodes 3 --tls-cert server.crt --tls-key server.key --tls-client-ca clients-ca.pem --users users.json
  maintctl --server tls://HOST:4222 --tlsca ca.pem --nkey admin.nk --inbox-prefix _INBOX_admin pending ID`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := refuseClientFlags(cmd); err != nil {
				return err
			}
			return a.up(cmd.Context(), f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:4222", "host:port where NATS accepts clients (port 0: a free port); with --nodes, node i takes port+i")
	fl.StringVar(&f.data, "data", "./maintsignals-data", "directory of the JetStream store (created if missing; with --nodes, one node-N directory per node)")
	fl.DurationVar(&f.tick, "tick", time.Minute, "how often the emitter re-exports every state (at least 1s)")
	fl.IntVar(&f.nodes, "nodes", 1, "JetStream servers: 1, or 3 or 5 for a local cluster (streams and bucket get as many replicas)")
	fl.BoolVar(&f.syncAlways, "sync-always", true, "sync the store (of every node) to disk before acknowledging each write (--sync-always=false: every 2 minutes, faster, may lose recent writes on power loss)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "127.0.0.1:9464", `host:port of the Prometheus page when no OTLP endpoint is set ("" for none)`)
	fl.StringVar(&f.monitorListen, "monitor-listen", "", "host:port of the NATS monitoring endpoint (/varz, /jsz, /healthz: what KEDA's nats-jetstream scaler reads), e.g. 127.0.0.1:8222; with --nodes, node i takes port+i")
	fl.IntVar(&f.partitions, "partitions", provision.DefaultConfig().Partitions, "partitions of the commands stream")
	fl.IntVar(&f.inFlight, "in-flight", provision.DefaultConfig().InFlight, inFlightUsage)
	fl.IntVar(&f.shards, "emitter-shards", provision.DefaultConfig().Shards, emitterShardsUsage)
	fl.DurationVar(&f.eventsMaxAge, "events-retention", provision.DefaultConfig().EventsMaxAge, "how long outcome events (the audit history) are kept")
	// Before the functions' flags: the emitter's --region is this one (it publishes the
	// region's summary).
	fl.StringVar(&f.region, "region", "", "run as the region NAME: JetStream domain NAME, joined to --hub (maintctl hub) as a leaf node, publishing its summary each tick")
	fl.StringVar(&f.hub, "hub", "", "the hub's leafnode address (nats-leaf://host:port or nats://host:port) that --region joins")
	f.functions = registry.Bind(fl, registry.Functions())
	addSecurityFlags(c, &f.security)
	return c
}

func (a *app) up(ctx context.Context, f upFlags) error {
	if err := f.functions.Sync(); err != nil {
		return err
	}
	if err := local.CheckNodes(f.nodes); err != nil {
		return err
	}
	if f.tick < time.Second {
		return fmt.Errorf("--tick %s: at least 1s", f.tick)
	}
	if err := checkRegion(f); err != nil {
		return err
	}
	host, _, err := local.ParseListen(f.listen)
	if err != nil {
		return err
	}
	sec, err := local.LoadSecurity(f.security)
	if err != nil {
		return err
	}
	if !local.IsLoopback(host) {
		a.warnExposure(sec, f.listen)
	}
	data, err := filepath.Abs(f.data)
	if err != nil {
		return fmt.Errorf("--data %q: %w", f.data, err)
	}
	if err := os.MkdirAll(data, 0o750); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	unlock, err := local.Lock(data)
	if err != nil {
		return err
	}
	defer unlock()
	plan, err := local.NewPlan(f.nodes, f.listen, data, f.monitorListen)
	if err != nil {
		return err
	}

	// Telemetry first: a metrics port in use fails before anything else starts.
	tel, err := a.setupTelemetry(ctx, "maintsignals", f.metricsListen, f.tick)
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(tel)

	nr, err := a.startNATS(ctx, plan, data, f.syncAlways, sec, regionLink{name: f.region, hub: f.hub})
	if err != nil {
		return err
	}
	defer nr.stop()
	durability := "synced before each acknowledgement"
	if !f.syncAlways {
		durability = "synced every 2 minutes"
	}
	a.printf("store: %s (%s)\n", data, durability)
	if f.nodes > 1 {
		a.printf("NATS_URL=%s\n", nr.urls)
	}

	rep, err := provision.RunRetrying(ctx, nr.provision, provision.Config{Replicas: f.nodes, Tick: f.tick, Partitions: f.partitions, Shards: f.shards, InFlight: f.inFlight, EventsMaxAge: f.eventsMaxAge, Webhooks: f.functions.Serves(domain.WebhookStream)}, a.log)
	if rep != nil {
		a.printf("provisioned:\n")
		if perr := a.printReport(rep, "  "); perr != nil {
			return perr
		}
	}
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}

	a.printf("metrics: %s\n", metricsWhere(tel, a.env))

	err = f.functions.Run(ctx, registry.Env{JS: nr.functions, ByRole: nr.byRole, Tel: tel, Log: a.log, Tick: f.tick, Up: true}, func(names []string) {
		a.printf("functions: %s\n", strings.Join(names, ", "))
		for i, in := range f.functions.Instances {
			if in.Address != nil && in.Address() != "" {
				a.printf("%s: %s\n", f.functions.Functions[i].Name, in.Address())
			}
		}
		a.printf("ready: try `NATS_URL=%s maintctl%s pending <resource-id>`; Ctrl-C stops\n", nr.urls, sec.ClientHint())
	})
	a.log.Info("functions stopped; shutting NATS down")
	nr.stop()
	if err == nil {
		a.printf("stopped\n")
	}
	return err
}

func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.stdout, format, args...)
}
