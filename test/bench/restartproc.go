package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// serverProc is a server child storing in a directory the bench restarts it on.
type serverProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	url string
}

// startServerProc starts a server child on dir and returns once it accepts connections (it
// has recovered every stream by then).
func startServerProc(ctx context.Context, dir string) (*serverProc, error) {
	cmd, in, out, err := child(ctx, "server", childStoreEnv+"="+dir)
	if err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, in: in}
	line, err := out.ReadString('\n')
	if err != nil {
		_ = p.kill()
		return nil, fmt.Errorf("server child: %w", err)
	}
	p.url = strings.TrimSpace(line)
	return p, nil
}

// kill ends the server with SIGKILL: it writes nothing more, as in a crash.
func (p *serverProc) kill() error {
	defer p.in.Close()
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill the server: %w", err)
	}
	_ = p.cmd.Wait() // "signal: killed"
	return nil
}

// stop closes the server's stdin: it stops cleanly, writing every stream's state.
func (p *serverProc) stop() error {
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("server child: %w", err)
	}
	return nil
}

// ourRecovery restarts our server on dir and times, from the restart, a command on entity
// applied through the command function and a whole tick of n entities exported to otlp by an
// emitter replica in a child process, both started as soon as the server accepts connections.
func ourRecovery(ctx context.Context, dir, otlp string, n, entity int) (*serverProc, recovery, error) {
	var r recovery
	start := time.Now()
	p, err := startServerProc(ctx, dir)
	if err != nil {
		return nil, r, err
	}
	r.ready = time.Since(start)
	applied := make(chan error, 1)
	go func() {
		err := applyOne(ctx, p.url, entity)
		r.command = time.Since(start)
		applied <- err
	}()
	var terr error
	r.emission, r.tick, terr = exportTick(ctx, p.url, otlp, n, start)
	if err := cmp.Or(<-applied, terr); err != nil {
		_ = p.kill()
		return nil, r, err
	}
	return p, r, nil
}

// applyOne sends a command for the i-th entity through one command function replica, started
// now, and waits for its applied outcome.
func applyOne(ctx context.Context, url string, i int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	c := domain.Command{ID: fmt.Sprintf("restart-%d", time.Now().UnixNano()), ResourceID: entityID(i), Task: domain.TaskPending}
	sub, err := nc.SubscribeSync(domain.EventSubject(domain.MustKey(c.ResourceID)))
	if err != nil {
		return err
	}
	stop, err := startReplicas(ctx, func() (*nats.Conn, error) { return nats.Connect(url) }, 1, nil)
	if err != nil {
		return err
	}
	defer stop()
	js, _ := jetstream.New(nc)
	if _, err := js.PublishMsg(ctx, commandMsg(c)); err != nil {
		return fmt.Errorf("publish the command: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			return fmt.Errorf("the command's outcome: %w", err)
		}
		ev, err := domain.DecodeEvent(m.Data)
		if err != nil || ev.CommandID != c.ID {
			continue
		}
		if ev.Outcome != domain.OutcomeApplied {
			return fmt.Errorf("the command was %s: %s", ev.Outcome, ev.Message)
		}
		return nil
	}
}

// exportTick starts an emitter replica holding every shard in a child process and runs one
// emission, which must export the whole fleet of n; it returns the emission's own time and
// the time from start until it ended.
func exportTick(ctx context.Context, url, otlp string, n int, start time.Time) (emission, done time.Duration, err error) {
	p, err := startEmitterProc(ctx, []string{"MAINT_BENCH_NATS=" + url, "MAINT_BENCH_OTLP=" + otlp}, "")
	if err != nil {
		return 0, 0, err
	}
	c, err := p.emit()
	done = time.Since(start)
	if _, cerr := p.close(); err == nil {
		err = cerr
	}
	if err == nil && c.entities != n {
		err = fmt.Errorf("the tick exported %d entities, want %d", c.entities, n)
	}
	return c.wall, done, err
}
