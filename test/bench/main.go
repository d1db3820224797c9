// Command bench measures the functions against the raw NATS limit on the same embedded server,
// in one run, and prints figures (never asserts them). Its last lines are the ratios the
// project tracks. Usage: go run ./test/bench [-quick] [-commands-only | -signed-only | -shards-only | -restart-only | -campaigns-only | -web-only | -policy-only]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/emitter"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/store"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
)

// sizes of one run.
type sizes struct {
	rawDuration   time.Duration
	throughputN   int
	keys          int
	latencyRate   int
	latencyFor    time.Duration
	emitterCounts []int
	webhookN      int
	campaigns     campaignSizes
	durableN      int // commands of the durable throughput runs
	durableRate   int // commands per second of the durable latency runs
	emitterOwnN   int // entities of the emitter's own memory
	webN          int // entities of the web view's figures
	webRequests   int // timed requests per page
	restartN      int // entities of the crash figures (after twice as many commands)
}

var full = sizes{rawDuration: 5 * time.Second, throughputN: 20000, keys: 64, latencyRate: 1000, latencyFor: 5 * time.Second, emitterCounts: []int{10_000, 100_000, 1_000_000}, webhookN: 20000,
	campaigns: fullCampaigns, durableN: 5000, durableRate: 200, emitterOwnN: 1_000_000, webN: 1_000_000, webRequests: 200, restartN: 1_000_000}

func main() {
	if runChild() {
		return
	}
	quick := flag.Bool("quick", false, "small sizes (a smoke run)")
	flag.IntVar(&partitions, "partitions", 0, "command partitions (0: the provisioning default)")
	flag.BoolVar(&commandsOnly, "commands-only", false, "skip the emitter figures")
	flag.BoolVar(&signedOnly, "signed-only", false, "only the command throughput unsigned and signed: unsynced, durable R1 and R3")
	flag.BoolVar(&campaignsOnly, "campaigns-only", false, "only the campaign figures (announcements, create to the last applied, dry run)")
	flag.BoolVar(&webOnly, "web-only", false, "only the web view's figures: the fleet page at a million entities (-quick: 2000) against 50 direct KV reads")
	flag.BoolVar(&durableOnly, "durable-only", false, "only the durable R3 command figures: throughput and latency (profile them with -cpuprofile)")
	flag.BoolVar(&policyOnly, "policy-only", false, "only the command throughput with a customer's policy in force and without")
	flag.BoolVar(&restartOnly, "restart-only", false, "only the crash figures: our store and a bare bucket of a million (-quick: 2000) restarted after SIGKILL and after a clean stop")
	entities := flag.Int("entities", 0, "entities the command load is spread over (0: 64, or 16 with -quick)")
	fleet := flag.Int("fleet", 0, "entities of the figures in processes of their own (0: 1,000,000, or the -quick size)")
	flag.BoolVar(&matureRecords, "mature", false, "records as after many commands (the last 32 command ids and the last event), not fresh ones")
	flag.BoolVar(&shardsOnly, "shards-only", false, "only the figures of the signal at a fleet's scale (emitter and notices in processes of their own)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		// The children profile themselves beside it.
		os.Setenv(childProfileEnv, *cpuprofile)
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := full
	if *quick {
		s = smoke
	}
	s.keys = cmp.Or(*entities, s.keys)
	s.emitterOwnN = cmp.Or(*fleet, s.emitterOwnN)
	s.restartN = cmp.Or(*fleet, s.restartN)
	runner := run
	switch {
	case signedOnly:
		runner = benchSignedOnly
	case shardsOnly:
		runner = benchShardsOnly
	case campaignsOnly:
		runner = func(ctx context.Context, s sizes, out io.Writer) error {
			slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
			return benchCampaigns(ctx, s.campaigns, out)
		}
	case webOnly:
		runner = benchWebOnly
	case policyOnly:
		runner = benchPolicyOnly
	case durableOnly:
		runner = func(ctx context.Context, s sizes, out io.Writer) error {
			slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
			r3, err := benchDurable(ctx, s, 3, false, sender{}, out)
			fmt.Fprintf(out, "ratio durable_command_r3 %.2f\nms durable_p99_r3 %.1f\n", r3.ratio(), ms(r3.p99))
			return err
		}
	case restartOnly:
		runner = benchRestartOnly
	}
	if err := runner(ctx, s, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

var smoke = sizes{rawDuration: 300 * time.Millisecond, throughputN: 300, keys: 16, latencyRate: 200, latencyFor: 500 * time.Millisecond, emitterCounts: []int{500, 1000, 2000}, webhookN: 300,
	campaigns: smokeCampaigns, durableN: 200, durableRate: 100, emitterOwnN: 2000, webN: 2000, webRequests: 20, restartN: 2000}

func run(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv, err := startServer(ctx, topology{replicas: 1, webhooks: true})
	if err != nil {
		return err
	}
	defer srv.stop()
	nc, js, connect := srv.nc, srv.js, srv.connect
	snd, err := newSigner()
	if err != nil {
		return err
	}

	raw, err := rawGetUpdate(ctx, js, 4, s.rawDuration, 1)
	if err != nil {
		return fmt.Errorf("raw Get+Update: %w", err)
	}
	fmt.Fprintf(out, "raw kv get+update, 4 workers: %.0f ops/s\n", raw)

	stopReplicas, err := startReplicas(ctx, connect, 4, nil)
	if err != nil {
		return err
	}
	tp, err := commandThroughput(ctx, nc, s.throughputN, s.keys, sender{})
	if err != nil {
		stopReplicas()
		return err
	}
	fmt.Fprintf(out, "command function, 4 replicas, %d commands over %d entities: %.0f commands/s (publish to outcome)\n", s.throughputN, s.keys, tp)
	p50, p99, err := commandLatency(ctx, nc, s.latencyRate, s.latencyFor, s.keys)
	stopReplicas()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "command latency at %d/s for %s: p50 %.1f ms, p99 %.1f ms\n", s.latencyRate, s.latencyFor, ms(p50), ms(p99))
	signed, err := compareSigned(ctx, srv, snd, s.throughputN, s.keys)
	if err != nil {
		return fmt.Errorf("signed commands: %w", err)
	}
	fmt.Fprintf(out, "command function, 4 replicas, %d commands over %d entities: %v\n", s.throughputN, s.keys, signed)
	pol, err := comparePolicy(ctx, srv, s.throughputN, s.keys)
	if err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	wh, err := benchWebhook(ctx, js, s.webhookN, s.keys, out)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}

	r1, err := benchDurable(ctx, s, 1, false, snd, out)
	if err != nil {
		return fmt.Errorf("durable R1: %w", err)
	}
	if _, err := benchDurable(ctx, s, 1, true, sender{}, out); err != nil {
		return fmt.Errorf("durable R1 with the webhook feed: %w", err)
	}
	r3, err := benchDurable(ctx, s, 3, false, snd, out)
	if err != nil {
		return fmt.Errorf("durable R3: %w", err)
	}
	durableLines := func() {
		printPolicy(out, s, pol)
		fmt.Fprintf(out, "ratio durable_command_r1 %.2f\nratio durable_command_r3 %.2f\nms durable_p99_r3 %.1f\n", r1.ratio(), r3.ratio(), ms(r3.p99))
		fmt.Fprintf(out, "ratio signed_command %.2f\nratio signed_command_r1 %.2f\nratio signed_command_r3 %.2f\n", signed.ratio(), r1.signed.ratio(), r3.signed.ratio())
	}
	if commandsOnly {
		fmt.Fprintf(out, "ratio command_throughput %.2f\nratio webhook_deliveries %.2f\nms command_p99 %.1f\n", tp/raw, wh, ms(p99))
		durableLines()
		return nil
	}
	em, err := benchEmitter(ctx, js, s.emitterCounts, out)
	if err != nil {
		return fmt.Errorf("emitter: %w", err)
	}
	sh, err := benchShards(ctx, s.emitterOwnN, out)
	if err != nil {
		return fmt.Errorf("emitter in shards: %w", err)
	}
	fmt.Fprintf(out, "emitter alone (the server in another process), %d entities, three emissions: peak RSS %.0f MB\n", s.emitterOwnN, mb(sh.ownPeak))

	fmt.Fprintf(out, "ratio command_throughput %.2f\n", tp/raw)
	fmt.Fprintf(out, "ratio webhook_deliveries %.2f\n", wh)
	fmt.Fprintf(out, "ratio emitter_100k %.2f\n", em.ratio100k)
	fmt.Fprintf(out, "ratio emitter_growth %.2f\n", em.growth)
	fmt.Fprintf(out, "mb emitter_1m_peak %.0f\n", mb(em.peakLargest))
	fmt.Fprintf(out, "ms command_p99 %.1f\n", ms(p99))
	durableLines()
	fmt.Fprintf(out, "mb emitter_1m_own %.0f\n", mb(sh.ownPeak))
	shardLines(out, sh)
	rf, err := benchRestart(ctx, s.restartN, out)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	restartLines(out, rf)
	wf, err := benchWeb(ctx, s.webN, s.webRequests, out)
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	wf.lines(out)
	return benchCampaigns(ctx, s.campaigns, out)
}

// benchWebOnly is -web-only.
func benchWebOnly(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	f, err := benchWeb(ctx, s.webN, s.webRequests, out)
	if err != nil {
		return fmt.Errorf("web view: %w", err)
	}
	f.lines(out)
	return nil
}

// shardLines are the tracked figures of the signal at a fleet's scale.
func shardLines(out io.Writer, sh shardFigures) {
	fmt.Fprintf(out, "s emitter_1m %.2f\n", sh.one.wall.Seconds())
	fmt.Fprintf(out, "ratio emitter_1m_deadline %.2f\n", sh.ratioDeadline())
	fmt.Fprintf(out, "ratio emitter_shards_2 %.2f\n", sh.ratioPair())
	fmt.Fprintf(out, "ratio emitter_shards_4 %.2f\n", sh.ratioFour())
	fmt.Fprintf(out, "ratio emitter_points %.2f\n", sh.ratioPoints())
	fmt.Fprintf(out, "s notices_1m %.2f\n", sh.notices.wall.Seconds())
}

type emitterFigures struct {
	ratio100k, growth float64
	peakLargest       uint64
}

// benchEmitter times one emission at each size (the middle size also against the bare cost:
// one streaming pass over the same bucket plus one export of as many points).
func benchEmitter(ctx context.Context, js jetstream.JetStream, counts []int, out io.Writer) (emitterFigures, error) {
	var f emitterFigures
	for _, c := range domain.AllCells() {
		kv, err := js.Stream(ctx, c.RecordsStream())
		if err != nil {
			return f, err
		}
		if err := kv.Purge(ctx); err != nil {
			return f, err
		}
	}
	r, err := otlpreceiver.New(otlpreceiver.WithoutPayloads())
	if err != nil {
		return f, err
	}
	defer r.Close()
	tel, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: r.GRPCEndpoint(), Protocol: "grpc", Interval: time.Hour})
	if err != nil {
		return f, err
	}
	defer tel.Shutdown(context.WithoutCancel(ctx))
	e, err := emitter.New(ctx, js, tel, emitter.Config{ExportTimeout: 10 * time.Minute})
	if err != nil {
		return f, err
	}
	defer e.Close()
	st, err := store.Open(ctx, js)
	if err != nil {
		return f, err
	}
	times := map[int]time.Duration{}
	filled := 0
	for _, n := range counts {
		if err := fillBucket(ctx, js, filled, n); err != nil {
			return f, err
		}
		filled = n
		c, err := measure(func() error { return emitOnce(ctx, e, n) })
		if err != nil {
			return f, err
		}
		times[n] = c.wall
		f.peakLargest = c.peak
		fmt.Fprintf(out, "emitter, %8d entities (%8d points): %v\n", n, n*len(domain.States)+len(domain.States), c)
		if n == counts[1] {
			scan, err := measure(func() error { return scanOnce(ctx, st, n) })
			if err != nil {
				return f, err
			}
			batches := prebuiltBatches(n, emitter.DefaultBatchSize)
			sdk, err := sdkExporter(ctx, r.GRPCEndpoint())
			if err != nil {
				return f, err
			}
			exp, err := measure(func() error { return exportOnce(ctx, sdk, tel.FleetResource(), batches) })
			_ = sdk.Shutdown(context.WithoutCancel(ctx))
			if err != nil {
				return f, err
			}
			fmt.Fprintf(out, "  bare scan of the same bucket:       %v\n", scan)
			fmt.Fprintf(out, "  bare export of as many points:      %v\n", exp)
			f.ratio100k = c.wall.Seconds() / (scan.wall + exp.wall).Seconds()
		}
	}
	f.growth = times[counts[2]].Seconds() / times[counts[1]].Seconds()
	return f, nil
}

// server is an embedded server, provisioned, and a client connection to it.
type server struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	connect func() (*nats.Conn, error)
	stop    func()
}

// topology is what a part of the bench runs on.
type topology struct {
	replicas   int  // 1: one embedded node; more: a loopback cluster of that many, every stream replicated
	syncAlways bool // every write synced before it is acknowledged
	webhooks   bool // the webhook feed provisioned too
}

// startServer starts a provisioned topology on loopback ports: clients connect over TCP, as
// deployed functions do.
func startServer(ctx context.Context, t topology) (*server, error) {
	dir, err := os.MkdirTemp("", "maint-bench-")
	if err != nil {
		return nil, err
	}
	var urls string
	var stopServers func()
	if t.replicas == 1 {
		srv, err := embedded.Start(embedded.Config{StoreDir: dir, Listen: "127.0.0.1:0", SyncAlways: t.syncAlways})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		urls, stopServers = srv.URL(), srv.Stop
	} else {
		c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{Nodes: t.replicas, StoreDir: dir, SyncAlways: t.syncAlways})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		urls, stopServers = c.URLs(), c.Stop
	}
	connect := func() (*nats.Conn, error) { return nats.Connect(urls) }
	stop := func() { stopServers(); os.RemoveAll(dir) }
	nc, err := connect()
	if err != nil {
		stop()
		return nil, err
	}
	js, _ := jetstream.New(nc)
	if _, err := provision.Run(ctx, js, provision.Config{Partitions: partitions, Replicas: t.replicas, Webhooks: t.webhooks}); err != nil {
		nc.Close()
		stop()
		return nil, err
	}
	return &server{nc: nc, js: js, connect: connect, stop: func() { nc.Close(); stop() }}, nil
}

// Settings of one run, from flags.
var (
	partitions    int
	commandsOnly  bool
	signedOnly    bool
	shardsOnly    bool
	campaignsOnly bool
	webOnly       bool
	policyOnly    bool
	durableOnly   bool
	restartOnly   bool
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
