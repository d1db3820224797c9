package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/logger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/emitter"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/telemetry"
)

// An emitter replica's own memory: the server runs in one child process of the bench, the
// emitter in another, the OTLP receiver and the filling client in the bench itself, so that the
// emitter's peak RSS holds nothing but the emitter (as a deployed replica's does).

// childRole is the environment variable that makes the bench binary (or its test binary) a
// child process of one role.
const childRole = "MAINT_BENCH_CHILD"

// runChild runs the role named in the environment and reports whether it was a child.
func runChild() bool {
	var err error
	switch os.Getenv(childRole) {
	case "":
		return false
	case "server":
		err = serveChild()
	case "emitter":
		err = emitterChild()
	case "sdkexport":
		err = sdkExportChild()
	case "notices":
		err = noticesChild()
	case "web":
		err = webChild()
	default:
		err = fmt.Errorf("unknown %s %q", childRole, os.Getenv(childRole))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	return true
}

// serveChild runs an embedded server (unsynced: the emitter's memory does not depend on it, and
// filling a million records synced would take minutes), prints its URL once it accepts
// connections and serves until stdin closes (the bench ended or died), then stops cleanly.
// It stores in MAINT_BENCH_STORE when that is set (and leaves it: the server is restarted on
// it), else in a directory of its own.
func serveChild() error {
	dir := os.Getenv(childStoreEnv)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "maint-bench-server-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	// A server recovers every stream before it listens: at a million entities after a
	// SIGKILL that takes longer than the default wait.
	cfg := embedded.Config{StoreDir: dir, Listen: "127.0.0.1:0", ReadyTimeout: 10 * time.Minute}
	if os.Getenv(childServerLogEnv) != "" {
		// What the server recovers at start, stream by stream, with the time each took.
		cfg.Logger = logger.NewStdLogger(true, false, false, false, true)
	}
	stopProfile := childProfile("server")
	srv, err := embedded.Start(cfg)
	stopProfile() // the profile covers the recovery
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// emitterChild is one emitter replica holding the shards of MAINT_BENCH_SHARDS ("0,1/4": shards
// 0 and 1 of 4; all of domain.DefaultShards when unset). It says "ready", then runs one
// emission of its shards, together, for each line on stdin and prints its cost; when stdin
// closes it prints its peak RSS.
func emitterChild() error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	shards, err := parseShards(os.Getenv("MAINT_BENCH_SHARDS"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	js, closeNC, err := childConn()
	if err != nil {
		return err
	}
	defer closeNC()
	tel, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: os.Getenv("MAINT_BENCH_OTLP"), Protocol: "grpc", Interval: time.Hour})
	if err != nil {
		return err
	}
	defer tel.Shutdown(ctx)
	e, err := emitter.New(ctx, js, tel, emitter.Config{ExportTimeout: 10 * time.Minute})
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Println("ready")
	stopProfile := childProfile("emitter")
	defer stopProfile()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var c childCost
		cpu0, start := cpuTime(), time.Now()
		for _, res := range e.EmitShards(ctx, shards) {
			if res.Err != nil {
				return res.Err
			}
			c.entities += res.Entities
			c.points += res.Points
		}
		c.wall, c.cpu = time.Since(start), cpuTime()-cpu0
		fmt.Println(c)
	}
	fmt.Println(rssPeak())
	return nil
}

// childProfile writes a CPU profile of the child to $MAINT_BENCH_CHILD_PROFILE.<role>.<pid>
// when that is set (the bench's -cpuprofile sets it); stop ends it.
func childProfile(role string) (stop func()) {
	base := os.Getenv(childProfileEnv)
	if base == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", base, role, os.Getpid()))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// childServerLogEnv, set, makes a server child log to its stderr.
const childServerLogEnv = "MAINT_BENCH_SERVER_LOG"

// childStoreEnv names the store directory of a server child.
const childStoreEnv = "MAINT_BENCH_STORE"

// childProfileEnv names the base path of the children's CPU profiles.
const childProfileEnv = "MAINT_BENCH_CHILD_PROFILE"

// childConn connects to the server of MAINT_BENCH_NATS.
func childConn() (jetstream.JetStream, func(), error) {
	nc, err := nats.Connect(os.Getenv("MAINT_BENCH_NATS"))
	if err != nil {
		return nil, nil, err
	}
	js, _ := jetstream.New(nc)
	return js, nc.Close, nil
}

// parseShards reads "0,1/4" (shards 0 and 1 of 4); "" is every shard of domain.DefaultShards.
func parseShards(s string) ([]domain.Shard, error) {
	if s == "" {
		out := make([]domain.Shard, domain.DefaultShards)
		for i := range out {
			out[i] = domain.Shard{Index: i, Of: domain.DefaultShards}
		}
		return out, nil
	}
	list, count, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(count)
	if !ok || err != nil {
		return nil, fmt.Errorf("shards %q: want 0,1/4", s)
	}
	var out []domain.Shard
	for _, f := range strings.Split(list, ",") {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("shards %q: want 0,1/4", s)
		}
		out = append(out, domain.Shard{Index: i, Of: n})
	}
	return out, nil
}

// childCost is what one operation of a child took: wall and CPU time (user and system, every
// thread of the child), and what it emitted.
type childCost struct {
	wall, cpu        time.Duration
	entities, points int
}

func (c childCost) String() string {
	return fmt.Sprintf("%d %d %d %d", c.wall, c.cpu, c.entities, c.points)
}

func parseCost(line string) (childCost, error) {
	var c childCost
	var wall, cpu int64
	if _, err := fmt.Sscanf(line, "%d %d %d %d", &wall, &cpu, &c.entities, &c.points); err != nil {
		return c, fmt.Errorf("child said %q: %w", strings.TrimSpace(line), err)
	}
	c.wall, c.cpu = time.Duration(wall), time.Duration(cpu)
	return c, nil
}

// cpuTime is the CPU time the process has used so far (Linux; 0 elsewhere).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// child starts the bench binary in a role.
func child(ctx context.Context, role string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader, error) {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), childRole+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, bufio.NewReader(stdout), nil
}

// filledServer starts a NATS server in a child process, provisions it and fills the bucket
// with n entities; stop ends both the connection and the child.
func filledServer(ctx context.Context, n int) (url string, js jetstream.JetStream, stop func(), err error) {
	srv, stdin, sout, err := child(ctx, "server")
	if err != nil {
		return "", nil, nil, err
	}
	stopSrv := func() { stdin.Close(); _ = srv.Wait() }
	fail := func(err error) (string, jetstream.JetStream, func(), error) {
		stopSrv()
		return "", nil, nil, err
	}
	if url, err = sout.ReadString('\n'); err != nil {
		return fail(fmt.Errorf("server child: %w", err))
	}
	url = strings.TrimSpace(url)
	nc, err := nats.Connect(url)
	if err != nil {
		return fail(err)
	}
	stop = func() { nc.Close(); stopSrv() }
	js, _ = jetstream.New(nc)
	if _, err := provision.Run(ctx, js, provision.Config{Partitions: partitions}); err != nil {
		stop()
		return "", nil, nil, err
	}
	if err := fillBucket(ctx, js, 0, n); err != nil {
		stop()
		return "", nil, nil, err
	}
	return url, js, stop, nil
}
