package main

import (
	"context"
	"maintsignals/test/testenv"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
)

// stack is an embedded server on a loopback port, provisioned, optionally with a command
// function running in the test process.
type stack struct {
	URL string
	JS  jetstream.JetStream
}

type stackOpts struct {
	noProvision bool
	noFunction  bool
}

func startStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	// embedded.Config.Listen with port 0 would listen on nats-server's default 4222, so the
	// test picks a free port itself.
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	s := testenv.Server(t, embedded.Config{Name: "maintctl-test", StoreDir: t.TempDir(), Listen: listen})
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{URL: s.URL(), JS: js}
	if st.URL == "" || strings.HasSuffix(st.URL, ":0") {
		t.Fatalf("server URL %q does not name the real port", st.URL)
	}
	if o.noProvision {
		return st
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Run(ctx, js, provision.Config{Tick: time.Minute, Partitions: 2, Webhooks: true}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if !o.noFunction {
		fctx, fcancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- command.Run(fctx, js, command.Config{Log: testenv.Quiet()})
		}()
		t.Cleanup(func() {
			fcancel()
			if err := <-done; err != nil {
				t.Errorf("command function: %v", err)
			}
		})
	}
	return st
}

// result is what one maintctl run produced.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) code() int { return exitCode(r.err) }

// cli runs maintctl in-process against the stack with the given environment.
type cli struct {
	t   *testing.T
	env map[string]string
}

func newCLI(t *testing.T, s *stack) *cli {
	env := map[string]string{"USER": "sre-test"}
	if s != nil {
		env["NATS_URL"] = s.URL
	}
	return &cli{t: t, env: env}
}

func (c *cli) getenv(k string) string { return c.env[k] }

func (c *cli) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.runCtx(ctx, args...)
}

func (c *cli) runCtx(ctx context.Context, args ...string) result {
	var out, errOut testenv.SyncBuffer
	err := run(ctx, args, c.getenv, &out, &errOut)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// ok runs maintctl and fails the test unless it succeeds.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.err != nil {
		c.t.Fatalf("maintctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

// upRun is a `maintctl up` running in-process.
type upRun struct {
	out, errOut *testenv.SyncBuffer
	stop        func() result // interrupts it and returns what it produced
}

// startUpInProcess runs maintctl args (an `up`) with a cancelable context until it is ready,
// within ready.
func startUpInProcess(t *testing.T, c *cli, ready time.Duration, args ...string) *upRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := &upRun{out: &testenv.SyncBuffer{}, errOut: &testenv.SyncBuffer{}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, c.getenv, u.out, u.errOut) }()
	stopped := false
	u.stop = func() result {
		t.Helper()
		cancel()
		stopped = true
		select {
		case err := <-done:
			return result{stdout: u.out.String(), stderr: u.errOut.String(), err: err}
		case <-time.After(30 * time.Second):
			t.Fatalf("up did not stop within 30s\n%s", u.errOut)
			return result{}
		}
	}
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	deadline := time.After(ready)
	for !strings.Contains(u.out.String(), "ready:") {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("up ended early: %v\nstdout:\n%s\nstderr:\n%s", err, u.out, u.errOut)
		case <-deadline:
			t.Fatalf("up not ready within %s\nstdout:\n%s\nstderr:\n%s", ready, u.out, u.errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return u
}

// with is a copy of c for test t (a subtest), with the environment variables of kv (name,
// value, ...) set; an empty value unsets one.
func (c *cli) with(t *testing.T, kv ...string) *cli {
	env := make(map[string]string, len(c.env))
	for k, v := range c.env {
		env[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(env, kv[i])
		} else {
			env[kv[i]] = kv[i+1]
		}
	}
	return &cli{t: t, env: env}
}
