// Command bench measures the functions against the raw NATS limit on the same embedded server,
// in one run, and prints figures (never asserts them). Its last lines are the ratios the
// project tracks. Usage: go run ./test/bench [-quick]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
)

// sizes of one run.
type sizes struct {
	rawDuration   time.Duration
	throughputN   int
	keys          int
	latencyRate   int
	latencyFor    time.Duration
	emitterCounts []int
}

var full = sizes{rawDuration: 5 * time.Second, throughputN: 20000, keys: 64, latencyRate: 1000, latencyFor: 5 * time.Second, emitterCounts: []int{10_000, 100_000, 1_000_000}}

func main() {
	quick := flag.Bool("quick", false, "small sizes (a smoke run)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s := full
	if *quick {
		s = smoke
	}
	if err := run(ctx, s, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var smoke = sizes{rawDuration: 300 * time.Millisecond, throughputN: 300, keys: 16, latencyRate: 200, latencyFor: 500 * time.Millisecond, emitterCounts: []int{500, 1000, 2000}}

func run(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	dir, err := os.MkdirTemp("", "maint-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	// Clients connect over loopback TCP, as deployed functions do.
	connect := func() (*nats.Conn, error) { return nats.Connect(srv.URL()) }
	nc, err := connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := provision.Run(ctx, js, provision.Config{}); err != nil {
		return err
	}

	raw, err := rawGetUpdate(ctx, js, 4, s.rawDuration)
	if err != nil {
		return fmt.Errorf("raw Get+Update: %w", err)
	}
	fmt.Fprintf(out, "raw kv get+update, 4 workers: %.0f ops/s\n", raw)

	stopReplicas, err := startReplicas(ctx, connect, 4)
	if err != nil {
		return err
	}
	tp, err := commandThroughput(ctx, nc, s.throughputN, s.keys)
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

	fmt.Fprintf(out, "ratio command_throughput %.2f\n", tp/raw)
	fmt.Fprintf(out, "ms command_p99 %.1f\n", ms(p99))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
