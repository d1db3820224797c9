// Package e2e runs maintctl as a user would: the binary built once, `maintctl up` as a
// subprocess on a loopback port and a temporary data directory, and the verbs as
// subprocesses against it.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maintsignals/test/testenv"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is the maintctl binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	b, remove, err := testenv.BuildMaintctl()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer remove()
	defer removeHistory()
	bin = b
	return m.Run()
}

// baseEnv is the environment of every subprocess: the test's, without anything that would
// point maintctl elsewhere (NATS_URL, OTEL_*, a NATS CLI context of the machine's user).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "NATS_CONTEXT=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") ||
			strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "USER=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "USER=e2e-sre", "XDG_CONFIG_HOME=/nonexistent/e2e-config")
}

// upProc is a running `maintctl up`.
type upProc struct {
	t           *testing.T
	cmd         *exec.Cmd
	URL         string
	out, errOut *testenv.SyncBuffer
	exited      chan struct{}
	waitErr     error
}

var listenRE = regexp.MustCompile(`listening on (nats://127\.0\.0\.1:\d+)`)

// startUp runs `maintctl up` on port and data, with extra flags, and waits until it is ready.
func startUp(t *testing.T, port int, data string, extra ...string) *upProc {
	t.Helper()
	p := &upProc{t: t, out: &testenv.SyncBuffer{}, errOut: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"up",
		"--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--data", data,
		"--tick", "1s",
		"--metrics-listen", "127.0.0.1:0"}, extra...)...)
	p.cmd.Env = baseEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errOut
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start maintctl up: %v", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.out.String(), "ready:") {
		select {
		case <-p.exited:
			t.Fatalf("maintctl up exited early (%v)\nstdout:\n%s\nstderr:\n%s", p.waitErr, p.out, p.errOut)
		case <-deadline:
			t.Fatalf("maintctl up not ready after 30s\nstdout:\n%s\nstderr:\n%s", p.out, p.errOut)
		case <-time.After(25 * time.Millisecond):
		}
	}
	m := listenRE.FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("maintctl up did not say where it listens:\n%s", p.out)
	}
	p.URL = m[1]
	if want := "nats://127.0.0.1:" + strconv.Itoa(port); p.URL != want {
		t.Fatalf("maintctl up listens on %s, want %s", p.URL, want)
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (p *upProc) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("maintctl up did not exit within 30s of SIGTERM\nstderr:\n%s", p.errOut)
	}
	if p.waitErr != nil {
		p.t.Fatalf("maintctl up exited with %v after SIGTERM, want status 0\nstdout:\n%s\nstderr:\n%s", p.waitErr, p.out, p.errOut)
	}
	if !strings.Contains(p.out.String(), "stopped") {
		p.t.Errorf("maintctl up did not report a clean stop:\n%s", p.out)
	}
}

// res is the result of one maintctl subprocess.
type res struct {
	stdout, stderr string
	code           int
}

// maintctl runs the binary with NATS_URL=url and returns its output and exit status.
func maintctl(t *testing.T, url string, args ...string) res {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = baseEnv()
	if url != "" {
		cmd.Env = append(cmd.Env, "NATS_URL="+url)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := res{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("maintctl %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs maintctl and fails unless it exits 0.
func ok(t *testing.T, url string, args ...string) string {
	t.Helper()
	r := maintctl(t, url, args...)
	if r.code != 0 {
		t.Fatalf("maintctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
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
