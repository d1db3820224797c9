package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/otlpreceiver"
)

// A crash at a million (SPEC §15): a server holding the fleet after twice as many commands is
// killed with SIGKILL and restarted on its store; it serves again once a command is applied
// through the command function and a whole tick is exported by an emitter replica. A bare
// server holding one bucket of the same size and history serves again once it answers a get
// and a put. Each server runs in a child process of its own, one after the other.

// restartFigures are the figures of benchRestart.
type restartFigures struct {
	kill, clean         recovery      // our store after a SIGKILL, after a clean stop
	bareKill, bareClean time.Duration // the bare bucket's
}

func (f restartFigures) ratio() float64 { return f.kill.total().Seconds() / f.bareKill.Seconds() }

// recovery is how long our restarted server took, from the restart, to accept connections, to
// apply a command and to export a whole tick; emission is that tick's own time.
type recovery struct {
	ready, command, tick, emission time.Duration
}

// total is the time until the server serves again: a command applied and a tick exported.
func (r recovery) total() time.Duration { return max(r.command, r.tick) }

func (r recovery) String() string {
	return fmt.Sprintf("%.2f s (accepting connections %.2f s, a command applied %.2f s, a whole tick exported %.2f s, of which the emission %.2f s)",
		r.total().Seconds(), r.ready.Seconds(), r.command.Seconds(), r.tick.Seconds(), r.emission.Seconds())
}

// restartLines are the tracked figures of a crash at a million.
func restartLines(out io.Writer, f restartFigures) {
	fmt.Fprintf(out, "s restart_kill_1m %.2f\n", f.kill.total().Seconds())
	fmt.Fprintf(out, "s restart_kill_bare_1m %.2f\n", f.bareKill.Seconds())
	fmt.Fprintf(out, "ratio restart_kill_1m %.2f\n", f.ratio())
	fmt.Fprintf(out, "s restart_clean_1m %.2f\n", f.clean.total().Seconds())
	fmt.Fprintf(out, "s restart_clean_bare_1m %.2f\n", f.bareClean.Seconds())
}

// benchRestart measures our store of n entities after 2n commands, then the bare bucket.
func benchRestart(ctx context.Context, n int, out io.Writer) (restartFigures, error) {
	var f restartFigures
	var err error
	if f.kill, f.clean, err = restartOurs(ctx, n, out); err != nil {
		return f, fmt.Errorf("our store: %w", err)
	}
	fmt.Fprintf(out, "restart after SIGKILL, %d entities after %d commands: serving again in %v\n", n, 2*n, f.kill)
	fmt.Fprintf(out, "restart after a clean stop, the same store: serving again in %v\n", f.clean)
	if f.bareKill, f.bareClean, err = restartBare(ctx, n, out); err != nil {
		return f, fmt.Errorf("bare bucket: %w", err)
	}
	fmt.Fprintf(out, "bare server, one bucket of %d keys after %d puts: a get and a put served %.2f s after a restart following SIGKILL, %.2f s following a clean stop\n",
		n, 2*n, f.bareKill.Seconds(), f.bareClean.Seconds())
	return f, nil
}

// benchRestartOnly is -restart-only.
func benchRestartOnly(ctx context.Context, s sizes, out io.Writer) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	f, err := benchRestart(ctx, s.restartN, out)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	restartLines(out, f)
	return nil
}

// restartOurs fills our store, kills its server, restarts it and times its recovery; then
// stops it cleanly and times the next one.
func restartOurs(ctx context.Context, n int, out io.Writer) (kill, clean recovery, err error) {
	dir, err := os.MkdirTemp("", "maint-bench-restart-")
	if err != nil {
		return kill, clean, err
	}
	defer os.RemoveAll(dir)
	// The receiver takes the requests without decoding them, as in the fleet's figures.
	r, err := otlpreceiver.New(otlpreceiver.WithoutDecoding())
	if err != nil {
		return kill, clean, err
	}
	defer r.Close()
	p, err := startServerProc(ctx, dir)
	if err != nil {
		return kill, clean, err
	}
	if err := fillThenKill(ctx, p, n, fillOurs, out); err != nil {
		return kill, clean, err
	}
	if p, kill, err = ourRecovery(ctx, dir, r.GRPCEndpoint(), n, 0); err != nil {
		return kill, clean, err
	}
	if err := p.stop(); err != nil {
		return kill, clean, err
	}
	// Entity 5 is in the same state as entity 0 was: the same command is applied.
	if p, clean, err = ourRecovery(ctx, dir, r.GRPCEndpoint(), n, 5); err != nil {
		return kill, clean, err
	}
	return kill, clean, p.stop()
}

// fillThenKill fills the server with n entities after 2n writes each (fill), prints the shape
// of its streams and kills it with SIGKILL.
func fillThenKill(ctx context.Context, p *serverProc, n int, fill func(context.Context, jetstream.JetStream, int) error, out io.Writer) error {
	start := time.Now()
	err := withConn(p.url, func(js jetstream.JetStream) error {
		if err := fill(ctx, js, n); err != nil {
			return err
		}
		fmt.Fprintf(out, "  filled %d entities after %d commands in %.1f s\n", n, 2*n, time.Since(start).Seconds())
		return storeShape(ctx, js, out)
	})
	if kerr := p.kill(); err == nil {
		err = kerr
	}
	return err
}

// withConn runs op on a connection of its own to url.
func withConn(url string, op func(jetstream.JetStream) error) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	var failed atomic.Int64
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return err
	}
	if err := op(js); err != nil {
		return err
	}
	if k := failed.Load(); k > 0 {
		return fmt.Errorf("%d asynchronous publishes failed", k)
	}
	return nil
}

// storeShape prints, for every stream holding messages, its messages, subjects and interior
// deletes: no stream may pass nats-server's high-cardinality threshold.
func storeShape(ctx context.Context, js jetstream.JetStream, out io.Writer) error {
	var parts []string
	var most uint64
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		st := info.State
		if st.Msgs == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d/%d", info.Config.Name, st.Msgs, st.NumSubjects, st.NumDeleted))
		most = max(most, st.NumSubjects, uint64(st.NumDeleted))
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("stream state: %w", err)
	}
	sort.Strings(parts)
	fmt.Fprintf(out, "  before the kill, per stream (messages/subjects/interior deletes): %s; the most subjects or interior deletes in one stream %d (threshold: more than %d)\n",
		strings.Join(parts, ", "), most, domain.HighCardinalityThreshold)
	return nil
}

// commandOrder is the entities of 2n commands, two each, in a fixed random order: a record's
// first write, deleted by its second, lies anywhere in its stream (an interior delete), as
// commands arriving over time leave them.
func commandOrder(n int) []int32 {
	order := make([]int32, 2*n)
	for j := range order {
		order[j] = int32(j % n)
	}
	rng := rand.New(rand.NewPCG(34, 2))
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	return order
}

// publishOrdered publishes, asynchronously, the messages msgs makes for each command of
// commandOrder(n) (j its index, i its entity), then waits for every acknowledgement.
func publishOrdered(ctx context.Context, js jetstream.JetStream, n int, msgs func(i, j int) ([]*nats.Msg, error)) error {
	for j, i := range commandOrder(n) {
		ms, err := msgs(int(i), j)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := publishAsync(ctx, js, m); err != nil {
				return err
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
