package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/emitter"
	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
	"maintsignals/shared/telemetry"
	"maintsignals/test/otlpreceiver"
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
// filling a million records synced would take minutes), prints its URL and serves until stdin closes (the
// bench ended or died).
func serveChild() error {
	dir, err := os.MkdirTemp("", "maint-bench-server-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// emitterChild runs two emissions of the bucket and prints the process's peak RSS.
func emitterChild() error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	want, err := strconv.Atoi(os.Getenv("MAINT_BENCH_ENTITIES"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	nc, err := nats.Connect(os.Getenv("MAINT_BENCH_NATS"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
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
	for range 2 {
		if err := emitOnce(ctx, e, want); err != nil {
			return err
		}
	}
	fmt.Println(rssPeak())
	return nil
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

// emitterOwnPeak is the peak RSS of an emitter process emitting n entities twice.
func emitterOwnPeak(ctx context.Context, n int) (uint64, error) {
	srv, stdin, out, err := child(ctx, "server")
	if err != nil {
		return 0, err
	}
	defer func() { stdin.Close(); _ = srv.Wait() }()
	url, err := out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("server child: %w", err)
	}
	url = strings.TrimSpace(url)
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := provision.Run(ctx, js, provision.Config{Partitions: partitions}); err != nil {
		return 0, err
	}
	if err := fillBucket(ctx, js, 0, n); err != nil {
		return 0, err
	}
	r, err := otlpreceiver.New(otlpreceiver.WithoutPayloads())
	if err != nil {
		return 0, err
	}
	defer r.Close()
	em, emIn, emOut, err := child(ctx, "emitter", "MAINT_BENCH_NATS="+url, "MAINT_BENCH_OTLP="+r.GRPCEndpoint(), "MAINT_BENCH_ENTITIES="+strconv.Itoa(n))
	if err != nil {
		return 0, err
	}
	emIn.Close()
	line, rerr := emOut.ReadString('\n')
	if err := em.Wait(); err != nil {
		return 0, fmt.Errorf("emitter child: %w", err)
	}
	if rerr != nil {
		return 0, fmt.Errorf("emitter child: %w", rerr)
	}
	return strconv.ParseUint(strings.TrimSpace(line), 10, 64)
}
