package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/grpc/encoding"

	"maintsignals/functions/notices"
	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
)

// The signal at a fleet's scale, each part in a process of its own as deployed: the server in
// one child, each emitter replica in another, the OTLP receiver and the filling client in the
// bench. CPU seconds are the children's own (every thread), so that two replicas can be
// compared with one, and our points with the SDK's, on a shared machine.

// runDeadline is the run deadline of the default one-minute tick.
const runDeadline = 30 * time.Second

// shardFigures are the figures of benchShards.
type shardFigures struct {
	one      childCost   // one replica holding every shard, the best of its emissions after the first
	ownPeak  uint64      // that replica's peak RSS over its emissions
	pair     []childCost // two replicas of half the shards each, emitting at once
	four     []childCost // four replicas of a shard each
	sdk      childCost   // the SDK's bare export of prebuilt points
	notices  childCost   // one notices run of every shard (entities: notices published)
	entities int
}

func (f shardFigures) ratioDeadline() float64 { return f.one.wall.Seconds() / runDeadline.Seconds() }

func (f shardFigures) ratioPair() float64 { return f.ratioOf(f.pair) }
func (f shardFigures) ratioFour() float64 { return f.ratioOf(f.four) }

// ratioOf is the CPU of the busiest of replicas over one replica's alone.
func (f shardFigures) ratioOf(rs []childCost) float64 {
	var most time.Duration
	for _, c := range rs {
		most = max(most, c.cpu)
	}
	return most.Seconds() / f.one.cpu.Seconds()
}

// ratioPoints is our points per CPU second over the SDK's.
func (f shardFigures) ratioPoints() float64 { return rate(f.one) / rate(f.sdk) }

func rate(c childCost) float64 { return float64(c.points) / c.cpu.Seconds() }

// benchShards fills a bucket of n entities on a server child and measures one emitter replica
// holding every shard, two replicas holding two shards each emitting at once, the SDK's bare
// export of the same points, and one notices run.
func benchShards(ctx context.Context, n int, out io.Writer) (shardFigures, error) {
	f := shardFigures{entities: n}
	url, _, stop, err := filledServer(ctx, n)
	if err != nil {
		return f, err
	}
	defer stop()
	// The receiver takes the requests without decoding them: a collector would run elsewhere,
	// and decoding millions of points here would take the CPU the emitters are measured on.
	r, err := otlpreceiver.New(otlpreceiver.WithoutDecoding())
	if err != nil {
		return f, err
	}
	defer r.Close()
	env := []string{"MAINT_BENCH_NATS=" + url, "MAINT_BENCH_OTLP=" + r.GRPCEndpoint(), "MAINT_BENCH_ENTITIES=" + strconv.Itoa(n)}
	if f.one, f.ownPeak, err = loneReplica(ctx, env); err != nil {
		return f, fmt.Errorf("one replica: %w", err)
	}
	if f.pair, err = replicas(ctx, env, 2); err != nil {
		return f, fmt.Errorf("two replicas: %w", err)
	}
	if f.four, err = replicas(ctx, env, 4); err != nil {
		return f, fmt.Errorf("four replicas: %w", err)
	}
	sdkN := min(n, 250_000) // prebuilt points take memory; a rate needs no more
	if f.sdk, err = childOnce(ctx, "sdkexport", append(env, "MAINT_BENCH_ENTITIES="+strconv.Itoa(sdkN))); err != nil {
		return f, fmt.Errorf("SDK export: %w", err)
	}
	if f.notices, err = childOnce(ctx, "notices", env); err != nil {
		return f, fmt.Errorf("notices: %w", err)
	}
	fmt.Fprintf(out, "emitter, one replica of %d shards, %d entities (the server in another process): %.2f s, %.2f CPU s, %.0f points per CPU second; peak RSS %.0f MB over its emissions\n",
		domain.DefaultShards, n, f.one.wall.Seconds(), f.one.cpu.Seconds(), rate(f.one), mb(f.ownPeak))
	fmt.Fprintf(out, "emitter, two replicas of %d shards each emitting at once: %.2f and %.2f CPU s (%.2f and %.2f s)\n",
		domain.DefaultShards/2, f.pair[0].cpu.Seconds(), f.pair[1].cpu.Seconds(), f.pair[0].wall.Seconds(), f.pair[1].wall.Seconds())
	fmt.Fprintf(out, "emitter, four replicas of one shard each emitting at once: %.2f, %.2f, %.2f and %.2f CPU s\n",
		f.four[0].cpu.Seconds(), f.four[1].cpu.Seconds(), f.four[2].cpu.Seconds(), f.four[3].cpu.Seconds())
	fmt.Fprintf(out, "  the SDK's bare OTLP export of %d entities' prebuilt points: %.2f CPU s, %.0f points per CPU second\n", sdkN, f.sdk.cpu.Seconds(), rate(f.sdk))
	fmt.Fprintf(out, "notices, one replica of %d shards, %d entities: %.2f s, %.2f CPU s, %d notices published\n",
		domain.DefaultShards, n, f.notices.wall.Seconds(), f.notices.cpu.Seconds(), f.notices.entities)
	return f, nil
}

// measured is how many emissions are measured after the first (the process warms up); each
// figure is the best of them, as the machine is shared.
const measured = 2

// best keeps the lower wall and the lower CPU time of two costs of the same work.
func best(a, b childCost) childCost {
	if a.points == 0 {
		return b
	}
	a.wall, a.cpu = min(a.wall, b.wall), min(a.cpu, b.cpu)
	return a
}

// loneReplica is one replica holding every shard: a first emission (the process warms up) and
// the best of the next ones; then its peak RSS.
func loneReplica(ctx context.Context, env []string) (childCost, uint64, error) {
	p, err := startEmitterProc(ctx, env, "")
	if err != nil {
		return childCost{}, 0, err
	}
	var c childCost
	for i := 0; i <= measured && err == nil; i++ {
		var next childCost
		if next, err = p.emit(); i > 0 {
			c = best(c, next)
		}
	}
	peak, cerr := p.close()
	if err == nil {
		err = cerr
	}
	return c, peak, err
}

// replicas is n replicas holding a share of the shards each, as n replicas sharing a tick: a
// first emission of each alone, then all at once, the best of measured rounds.
func replicas(ctx context.Context, env []string, n int) ([]childCost, error) {
	out := make([]childCost, n)
	each := domain.DefaultShards / n
	var procs []*emitterProc
	defer func() {
		for _, p := range procs {
			p.close()
		}
	}()
	for i := range n {
		var list []string
		for s := i * each; s < (i+1)*each; s++ {
			list = append(list, strconv.Itoa(s))
		}
		p, err := startEmitterProc(ctx, env, strings.Join(list, ",")+"/"+strconv.Itoa(domain.DefaultShards))
		if err != nil {
			return out, err
		}
		procs = append(procs, p)
		if _, err := p.emit(); err != nil {
			return out, err
		}
	}
	for range measured {
		errs := make(chan error, n)
		for i, p := range procs {
			go func() {
				c, err := p.emit()
				out[i] = best(out[i], c)
				errs <- err
			}()
		}
		for range procs {
			if err := <-errs; err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// emitterProc is an emitter replica in a child process (emitterChild).
type emitterProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startEmitterProc(ctx context.Context, env []string, shards string) (*emitterProc, error) {
	cmd, in, out, err := child(ctx, "emitter", append(env, "MAINT_BENCH_SHARDS="+shards)...)
	if err != nil {
		return nil, err
	}
	p := &emitterProc{cmd: cmd, in: in, out: out}
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		p.close()
		return nil, fmt.Errorf("emitter child: %q, %v", line, err)
	}
	return p, nil
}

// emit runs one emission in the child and returns its cost.
func (p *emitterProc) emit() (childCost, error) {
	if _, err := fmt.Fprintln(p.in, "emit"); err != nil {
		return childCost{}, err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return childCost{}, fmt.Errorf("emitter child: %w", err)
	}
	return parseCost(line)
}

// close ends the child and returns its peak RSS.
func (p *emitterProc) close() (uint64, error) {
	if p.in == nil {
		return 0, nil
	}
	p.in.Close()
	p.in = nil
	line, rerr := p.out.ReadString('\n')
	if err := p.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("emitter child: %w", err)
	}
	if rerr != nil {
		return 0, rerr
	}
	return strconv.ParseUint(strings.TrimSpace(line), 10, 64)
}

// childOnce runs a child of role that does one thing and prints its cost.
func childOnce(ctx context.Context, role string, env []string) (childCost, error) {
	cmd, in, out, err := child(ctx, role, env...)
	if err != nil {
		return childCost{}, err
	}
	in.Close()
	line, rerr := out.ReadString('\n')
	if err := cmd.Wait(); err != nil {
		return childCost{}, fmt.Errorf("%s child: %w", role, err)
	}
	if rerr != nil {
		return childCost{}, rerr
	}
	return parseCost(line)
}

// sdkExportChild builds the points of MAINT_BENCH_ENTITIES entities as the emitter sends them,
// in the SDK's data model (not measured), and exports them through the SDK's OTLP exporter
// (measured): the bare cost of exporting those points.
func sdkExportChild() error {
	// The SDK's exporter as it comes: grpc's gzip, the standard library's at its default level
	// (this binary's telemetry replaces it process-wide; this is still start, before any call).
	encoding.RegisterCompressor(&stdGzip{})
	n, err := strconv.Atoi(os.Getenv("MAINT_BENCH_ENTITIES"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	batches := prebuiltBatches(n, defaultBatchPoints)
	exp, err := sdkExporter(ctx, os.Getenv("MAINT_BENCH_OTLP"))
	if err != nil {
		return err
	}
	defer exp.Shutdown(ctx)
	res := resource.Default()
	points := 0
	for _, sm := range batches {
		for _, m := range sm.Metrics {
			points += dataPoints(m.Data)
		}
	}
	cpu0, start := cpuTime(), time.Now()
	if err := exportOnce(ctx, exp, res, batches); err != nil {
		return err
	}
	fmt.Println(childCost{wall: time.Since(start), cpu: cpuTime() - cpu0, entities: n, points: points})
	return nil
}

// noticesChild runs one notices run of every shard over the bucket and prints its cost, with
// the notices published as its entities.
func noticesChild() error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	js, closeNC, err := childConn()
	if err != nil {
		return err
	}
	defer closeNC()
	n, err := notices.New(ctx, js, notices.Config{})
	if err != nil {
		return err
	}
	shards, _ := parseShards("")
	cpu0, start := cpuTime(), time.Now()
	res, err := n.RunShards(ctx, shards)
	if err != nil {
		return err
	}
	fmt.Println(childCost{wall: time.Since(start), cpu: cpuTime() - cpu0, entities: res.Published})
	return nil
}

// stdGzip is grpc's own gzip compressor as it comes: the standard library at the default
// level, writers pooled.
type stdGzip struct{ writers sync.Pool }

func (*stdGzip) Name() string { return "gzip" }

func (c *stdGzip) Compress(w io.Writer) (io.WriteCloser, error) {
	if z, ok := c.writers.Get().(*pooledGzip); ok {
		z.Reset(w)
		return z, nil
	}
	z, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	return &pooledGzip{Writer: z, pool: &c.writers}, err
}

func (*stdGzip) Decompress(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

type pooledGzip struct {
	*gzip.Writer
	pool *sync.Pool
}

func (z *pooledGzip) Close() error {
	defer z.pool.Put(z)
	return z.Writer.Close()
}

// benchShardsOnly is the -shards-only part: the fleet figures alone, with their tracked lines.
func benchShardsOnly(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	sh, err := benchShards(ctx, s.emitterOwnN, out)
	if err != nil {
		return fmt.Errorf("emitter in shards: %w", err)
	}
	shardLines(out, sh)
	return nil
}
