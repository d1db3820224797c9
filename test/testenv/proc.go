package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proc is one process a test runs (maintctl, a nats-server node, a publisher). Its stdout and
// stderr go to files in the test's temporary directory; their tails are logged when the test
// fails. It is killed at cleanup.
type Proc struct {
	T       testing.TB
	Name    string
	Cmd     *exec.Cmd
	OutPath string
	ErrPath string
	exited  chan struct{}
	waitErr error
}

// StartProc starts cmd (its Stdout and Stderr are set here); name labels its log files.
func StartProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	dir := t.TempDir()
	p := &Proc{T: t, Name: name, Cmd: cmd, exited: make(chan struct{}),
		OutPath: filepath.Join(dir, name+".stdout"), ErrPath: filepath.Join(dir, name+".stderr")}
	stdout, err := os.Create(p.OutPath)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(p.ErrPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = stdout.Close()
		_ = stderr.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (%s): exit %v\n--- stdout (tail)\n%s--- stderr (tail)\n%s", name, strings.Join(cmd.Args, " "), p.waitErr, Tail(p.OutPath, 30), Tail(p.ErrPath, 40))
		}
	})
	return p
}

// Exited is closed when the process has ended.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// WaitErr is the process's exit error, once Exited is closed.
func (p *Proc) WaitErr() error {
	<-p.exited
	return p.waitErr
}

// WaitFor waits until the process's stdout or stderr contains s.
func (p *Proc) WaitFor(s string, timeout time.Duration) {
	p.T.Helper()
	deadline := time.Now().Add(timeout)
	for !p.LogContains(s) {
		select {
		case <-p.exited:
			p.T.Fatalf("%s exited (%v) before saying %q\nstderr:\n%s", p.Name, p.waitErr, s, Tail(p.ErrPath, 40))
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.T.Fatalf("%s did not say %q within %s\nstderr:\n%s", p.Name, s, timeout, Tail(p.ErrPath, 40))
		}
	}
}

// LogContains reports whether the process's stdout or stderr contains s.
func (p *Proc) LogContains(s string) bool {
	for _, path := range []string{p.OutPath, p.ErrPath} {
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// Kill sends SIGKILL (if still running) and waits for the process to end.
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
}

// Term sends SIGTERM and waits up to timeout for the process to exit; it returns the exit
// error (nil for status 0). After the timeout it kills the process.
func (p *Proc) Term(timeout time.Duration) error {
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %s: %w", p.Name, err)
	}
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.Name, timeout)
	}
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// ProcEnv is the environment of a process a test starts: the test's, without anything that
// would point maintctl elsewhere (NATS_URL, OTEL_*), plus extra.
func ProcEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
