package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/functions/notices"
	"maintsignals/functions/webhook"
	"maintsignals/infra/provision"
	"maintsignals/shared/admin"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/natsconn"
	"maintsignals/shared/signing"
	"maintsignals/shared/telemetry"
)

// serverName is the name of the server `maintctl up` embeds. It must not change between runs
// on one data directory.
const serverName = "maintctl-0"

// functionEnv is what a function gets from the process that runs it.
type functionEnv struct {
	js   jetstream.JetStream
	tel  *telemetry.Telemetry
	a    *app
	tick time.Duration // the schedule interval, when known (up); 0 otherwise
	emit emitFlags
	up   bool // run by `maintctl up`, where the webhook function may have no subscription
}

// emitFlags configure the functions (the name stays for the emitter's flags, which came first).
type emitFlags struct {
	retention  time.Duration
	pucm       bool
	stuckAfter time.Duration
	remind     string
	minNotice  time.Duration

	signers           string
	maxCommandAge     time.Duration
	requireSignatures bool
	entityRate        float64
	entityBurst       int

	subscriptions string
	fromStart     bool
}

func addEmitFlags(c *cobra.Command, f *emitFlags) {
	c.Flags().DurationVar(&f.retention, "retention", emitter.DefaultRetention, "emitter: how long an entity in None keeps being emitted")
	c.Flags().BoolVar(&f.pucm, "pucm", false, "emitter: also emit the ARO-RP compatible cluster.maintenance.pucm metric")
	c.Flags().DurationVar(&f.stuckAfter, "stuck-after", domain.DefaultStuckAfter, "emitter and notices: an update running longer than this is stuck (cluster.maintenance.stuck, the stuck notice)")
	c.Flags().StringVar(&f.remind, "remind", notices.FormatLadder(notices.DefaultRemind), `notices: reminder lead times before a window starts, comma-separated ("" for none)`)
	c.Flags().DurationVar(&f.minNotice, "min-notice", 0, "command: refuse a Pending whose window starts sooner than this after the command is handled, unless forced (0: no minimum)")
	c.Flags().StringVar(&f.signers, "signers", "", `command: JSON file of the keys allowed to sign commands: [{"name":"alice","publicKeys":["U…"],"roles":["admin"]}] (roles: admin, updater); read again when it changes`)
	c.Flags().BoolVar(&f.requireSignatures, "require-signatures", false, "command: refuse unsigned commands (Unauthorized); needs --signers")
	c.Flags().DurationVar(&f.maxCommandAge, "max-command-age", command.DefaultMaxCommandAge, "command: a signed command issued longer before the stream stored it is refused (Unauthorized, expired)")
	c.Flags().Float64Var(&f.entityRate, "entity-rate", command.DefaultEntityRate, "command: changes per second admitted per entity, by the commands' stored times (a flood beyond is refused); negative: no limit")
	c.Flags().IntVar(&f.entityBurst, "entity-burst", command.DefaultEntityBurst, "command: burst of changes admitted per entity")
	c.Flags().StringVar(&f.subscriptions, "subscriptions", "", `webhook: JSON file of the subscriptions: [{"name","url","secret":"whsec_…","types":[…],"states":[…],"resourcePrefix","caFile"}]`)
	c.Flags().BoolVar(&f.fromStart, "from-start", false, "webhook: a subscription seen for the first time starts at the oldest stored event (default: at new events); one with progress keeps it")
}

// authority loads the signing policy of --signers / --require-signatures (nil: none) and
// follows the signers file until ctx ends, so that keys rotate without a restart.
func (f emitFlags) authority(ctx context.Context, log *slog.Logger) (command.Authority, error) {
	switch {
	case f.signers == "" && f.requireSignatures:
		return nil, errors.New("--require-signatures needs --signers FILE")
	case f.signers == "":
		return nil, nil
	}
	return signing.Watch(ctx, f.signers, f.requireSignatures, signing.DefaultWatchEvery, log)
}

// functionSpec is one function maintctl can run.
type functionSpec struct {
	name, about string
	// run serves until ctx is cancelled, then drains and returns nil. nil run: not available
	// in this build.
	run func(ctx context.Context, fe functionEnv) error
}

// functions lists every function, in the order `up` starts them. Adding a function is one
// entry here.
var functions = []functionSpec{
	{
		name:  "command",
		about: "applies admin and outcome commands (every partition of MAINT_COMMANDS)",
		run: func(ctx context.Context, fe functionEnv) error {
			auth, err := fe.emit.authority(ctx, fe.a.log)
			if err != nil {
				return err
			}
			return command.Run(ctx, fe.js, command.Config{
				Log:           fe.a.log,
				Meter:         fe.tel.Meter("maintsignals/functions/command"),
				Auth:          auth,
				MaxCommandAge: fe.emit.maxCommandAge,
				EntityRate:    fe.emit.entityRate,
				EntityBurst:   fe.emit.entityBurst,
				MinNotice:     fe.emit.minNotice,
			})
		},
	},
	{
		name:  "emitter",
		about: "re-exports every tracked state as OTLP metrics on each tick",
		run: func(ctx context.Context, fe functionEnv) error {
			return emitter.Run(ctx, fe.js, fe.tel, emitter.Config{
				Tick:       fe.tick,
				Retention:  fe.emit.retention,
				PUCM:       fe.emit.pucm,
				StuckAfter: fe.emit.stuckAfter,
				Logger:     fe.a.log,
			})
		},
	},
	{
		name:  "notices",
		about: "publishes lifecycle notices (reminders, due, overdue, stuck) on each tick",
		run: func(ctx context.Context, fe functionEnv) error {
			ladder, err := notices.ParseLadder(fe.emit.remind)
			if err != nil {
				return fmt.Errorf("--remind: %w", err)
			}
			return notices.Run(ctx, fe.js, notices.Config{
				Remind:     ladder,
				StuckAfter: fe.emit.stuckAfter,
				Tick:       fe.tick,
				Logger:     fe.a.log,
				Meter:      fe.tel.Meter(notices.ScopeName),
			})
		},
	},
	{
		name:  "webhook",
		about: "delivers events and notices to the --subscriptions endpoints (signed CloudEvents)",
		run: func(ctx context.Context, fe functionEnv) error {
			if fe.emit.subscriptions == "" {
				if !fe.up {
					return errors.New("the webhook function needs --subscriptions FILE")
				}
				<-ctx.Done() // up without subscriptions: nothing to deliver
				return nil
			}
			subs, err := webhook.LoadFile(fe.emit.subscriptions)
			if err != nil {
				return err
			}
			return webhook.Run(ctx, fe.js, webhook.Config{
				Subscriptions: subs,
				FromStart:     fe.emit.fromStart,
				Log:           fe.a.log,
				Meter:         fe.tel.Meter("maintsignals/functions/webhook"),
			})
		},
	},
}

func findFunction(name string) (functionSpec, bool) {
	for _, f := range functions {
		if f.name == name {
			return f, true
		}
	}
	return functionSpec{}, false
}

func functionNames() string {
	names := make([]string, len(functions))
	for i, f := range functions {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

type upFlags struct {
	listen        string
	data          string
	tick          time.Duration
	nodes         int
	syncAlways    bool
	metricsListen string
	monitorListen string
	partitions    int
	inFlight      int
	eventsMaxAge  time.Duration
	emit          emitFlags
	security      securityFlags
}

func (a *app) upCommand() *cobra.Command {
	var f upFlags
	c := &cobra.Command{
		Use:   "up [flags]",
		Short: "Run the whole stack on this machine until interrupted",
		Long: `Run the whole stack on this machine: an embedded NATS server with JetStream on disk under
--data, the streams, bucket, consumers and tick schedule provisioned, and every function
(` + functionNames() + `) running, until Ctrl-C or SIGTERM. Then the functions drain
and the server shuts down cleanly. Starting again on the same --data keeps every record and
event.

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
		Args: cobra.NoArgs,
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
	fl.DurationVar(&f.eventsMaxAge, "events-retention", provision.DefaultConfig().EventsMaxAge, "how long outcome events (the audit history) are kept")
	addEmitFlags(c, &f.emit)
	addSecurityFlags(c, &f.security)
	return c
}

func (a *app) up(ctx context.Context, f upFlags) error {
	switch f.nodes {
	case 1, 3, 5:
	default:
		return fmt.Errorf("--nodes %d: use 1, or 3 or 5 for a local JetStream cluster", f.nodes)
	}
	if f.tick < time.Second {
		return fmt.Errorf("--tick %s: at least 1s", f.tick)
	}
	host, port, err := parseListen(f.listen)
	if err != nil {
		return err
	}
	sec, err := f.security.load()
	if err != nil {
		return err
	}
	if !isLoopback(host) {
		a.warnExposure(sec, f.listen)
	}
	data, err := filepath.Abs(f.data)
	if err != nil {
		return fmt.Errorf("--data %q: %w", f.data, err)
	}
	if err := os.MkdirAll(data, 0o750); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	unlock, err := lockDataDir(data)
	if err != nil {
		return err
	}
	defer unlock()
	plan, err := planNATS(f, host, port, data)
	if err != nil {
		return err
	}

	// Telemetry first: a metrics port in use fails before anything else starts.
	tel, err := a.setupTelemetry(ctx, "maintsignals", f.metricsListen, f.tick)
	if err != nil {
		return err
	}
	defer a.shutdownTelemetry(tel)

	if f.monitorListen != "" {
		if _, _, err := net.SplitHostPort(f.monitorListen); err != nil {
			return fmt.Errorf("--monitor-listen %q: want host:port, e.g. 127.0.0.1:8222", f.monitorListen)
		}
		plan.monitor = f.monitorListen
	}
	nr, err := a.startNATS(ctx, plan, data, f.syncAlways, sec)
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

	rep, err := a.provisionUp(ctx, nr.provision, provision.Config{Replicas: f.nodes, Tick: f.tick, Partitions: f.partitions, InFlight: f.inFlight, EventsMaxAge: f.eventsMaxAge})
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

	err = a.runFunctions(ctx, functions, functionEnv{js: nr.functions, tel: tel, a: a, tick: f.tick, emit: f.emit, up: true}, func(names []string) {
		a.printf("functions: %s\n", strings.Join(names, ", "))
		a.printf("ready: try `NATS_URL=%s maintctl%s pending <resource-id>`; Ctrl-C stops\n", nr.urls, sec.clientHint())
	})
	a.log.Info("functions stopped; shutting NATS down")
	nr.stop()
	if err == nil {
		a.printf("stopped\n")
	}
	return err
}

// provisionUp provisions the stack of `up`. In a cluster that has just elected its leaders, a
// request can meet another election and get no answer at all; so each request is bounded by the
// client's default timeout (ctx carries no deadline) and a pass that failed that way is run
// again, for up to a minute. The report merges the passes: what an earlier pass created still
// shows as created.
func (a *app) provisionUp(ctx context.Context, js jetstream.JetStream, cfg provision.Config) (provision.Report, error) {
	const retryFor = time.Minute
	deadline := time.Now().Add(retryFor)
	var rep provision.Report
	for {
		next, err := provision.Run(ctx, js, cfg)
		rep = mergeReports(rep, next)
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return rep, err
		}
		a.log.Warn("provisioning met a NATS leader election; trying again", "error", err)
		select {
		case <-ctx.Done():
			return rep, err
		case <-time.After(time.Second):
		}
	}
}

// transient tells a failure that trying again may cure: no answer in time, or JetStream
// temporarily unavailable (503).
func transient(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		(errors.As(err, &apiErr) && apiErr.Code == 503)
}

// mergeReports returns next, where what was created or updated by the earlier pass prev shows
// as such instead of unchanged.
func mergeReports(prev, next provision.Report) provision.Report {
	done := make(map[string]provision.Change, len(prev))
	for _, ch := range prev {
		if ch.Action == provision.Created || ch.Action == provision.Updated {
			done[ch.Kind+" "+ch.Name] = ch
		}
	}
	out := make(provision.Report, len(next))
	for i, ch := range next {
		if earlier, ok := done[ch.Kind+" "+ch.Name]; ok && ch.Action == provision.Unchanged {
			ch = earlier
		}
		out[i] = ch
	}
	return out
}

// runFunctions runs the available functions until ctx is cancelled or one fails; ready is
// called once they are all started.
func (a *app) runFunctions(ctx context.Context, specs []functionSpec, fe functionEnv, ready func(names []string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A wrong signing setting stops everything before any function starts.
	check, stopCheck := context.WithCancel(ctx)
	_, err := fe.emit.authority(check, fe.a.log)
	stopCheck()
	if err != nil {
		return err
	}
	ladder, err := notices.ParseLadder(fe.emit.remind)
	if err == nil {
		_, err = notices.Config{Remind: ladder, StuckAfter: fe.emit.stuckAfter}.WithDefaults()
	}
	if err != nil {
		return fmt.Errorf("--remind, --stuck-after: %w", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		names []string
	)
	for _, spec := range specs {
		if spec.run == nil {
			a.log.Warn("function not available in this build; skipping", "function", spec.name)
			continue
		}
		names = append(names, spec.name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := spec.run(ctx, fe)
			if err == nil && ctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("function %s: %w", spec.name, err)
				}
				mu.Unlock()
				a.log.Error("function failed; stopping", "function", spec.name, "error", err)
				cancel()
			}
		}()
	}
	if len(names) == 0 {
		return errors.New("no function is available to run")
	}
	ready(names)
	<-ctx.Done()
	a.log.Info("stopping: draining functions")
	wg.Wait()
	return first
}

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
		if metricsListen != "" && strings.Contains(err.Error(), "listen") {
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

// parseListen reads --listen as host:port.
func parseListen(listen string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: want host:port, e.g. 127.0.0.1:4222", listen)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: bad port", listen)
	}
	return host, port, nil
}

// listenCheck listens on addr once, so that a port in use fails at once with a clear message
// (nats-server would only time out), and returns the address it bound: port 0 becomes a free
// port (nats-server itself reads 0 as its default, 4222).
func listenCheck(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	bound := ln.Addr().String()
	_ = ln.Close()
	if _, port, _ := net.SplitHostPort(addr); port != "0" {
		return addr, nil
	}
	return bound, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.stdout, format, args...)
}

// printReport prints a provisioning report for people or as JSON.
func (a *app) printReport(rep provision.Report, indent string) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, ch := range rep {
		detail := strings.Join(ch.Fields, ", ")
		if ch.Err != nil {
			if detail != "" {
				detail += ": "
			}
			detail += ch.Err.Error()
		}
		if detail == "" {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\n", indent, ch.Kind, ch.Name, ch.Action)
		} else {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, ch.Kind, ch.Name, ch.Action, detail)
		}
	}
	return tw.Flush()
}

type changeJSON struct {
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Action string   `json:"action"`
	Fields []string `json:"fields,omitempty"`
	Error  string   `json:"error,omitempty"`
}

func (a *app) provisionCommand() *cobra.Command {
	var (
		replicas, partitions, inFlight int
		eventsMaxAge                   time.Duration
		tick                           time.Duration
	)
	c := &cobra.Command{
		Use:   "provision [flags]",
		Short: "Create or update the streams, bucket, consumers and tick schedule",
		Long: `Create or update, idempotently, everything the functions need on the NATS server at
--server: the streams MAINT_COMMANDS, MAINT_EVENTS, MAINT_DLQ and MAINT_SCHEDULE, the bucket
maintenance, the durable consumers and the tick schedule. Prints what it created, updated or
left unchanged; exits with status 1 when something failed (a setting NATS cannot change on
an existing stream, such as the partition count, is reported as failed).`,
		Example: "  maintctl provision\n  maintctl provision --server nats://n1:4222,nats://n2:4222,nats://n3:4222 --replicas 3 --tick 1m",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			cl, err := a.connect(ctx, 0)
			if err != nil {
				return err
			}
			defer cl.Close()
			var rep provision.Report
			// A user that may not provision fails at once instead of waiting for the timeout.
			err = cl.Guard(ctx, ">", func(ctx context.Context) error {
				var err error
				rep, err = provision.Run(ctx, cl.JS, provision.Config{Replicas: replicas, Partitions: partitions, InFlight: inFlight, Tick: tick, EventsMaxAge: eventsMaxAge})
				return err
			})
			if rep != nil {
				if a.json() {
					docs := make([]changeJSON, len(rep))
					for i, ch := range rep {
						docs[i] = changeJSON{Kind: ch.Kind, Name: ch.Name, Action: string(ch.Action), Fields: ch.Fields}
						if ch.Err != nil {
							docs[i].Error = ch.Err.Error()
						}
					}
					if werr := a.writeJSON(docs); werr != nil {
						return werr
					}
				} else if perr := a.printReport(rep, ""); perr != nil {
					return perr
				}
			}
			if err != nil {
				return withAdvice(fmt.Errorf("provision: %w", err), "provisioning takes a user of the operator role: connect as one with --nkey FILE or --creds FILE")
			}
			return nil
		},
	}
	d := provision.DefaultConfig()
	c.Flags().IntVar(&replicas, "replicas", d.Replicas, "replicas of every stream and of the bucket: 1, 3 or 5")
	c.Flags().IntVar(&partitions, "partitions", d.Partitions, "partitions of the commands stream")
	c.Flags().IntVar(&inFlight, "in-flight", d.InFlight, inFlightUsage)
	c.Flags().DurationVar(&eventsMaxAge, "events-retention", d.EventsMaxAge, "how long outcome events (the audit history) are kept")
	c.Flags().DurationVar(&tick, "tick", d.Tick, "how often the emitter re-exports every state (at least 1s)")
	return c
}

const inFlightUsage = "commands of one partition out at once (to the one replica serving it, which runs different entities' commands at once and one entity's in order)"

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
