package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// Program is a testing.TB for a program that is not a test (go run ./test/soak), so that it
// starts processes, loads and audits with the helpers the tests use. Errors are logged and
// counted; Fatal logs, runs the cleanups (the processes started are killed) and exits 1. The
// methods it does not implement panic.
type Program struct {
	testing.TB // nil: only what is below is implemented
	// Keep leaves the temporary directories (the processes' logs among them) in place at Close.
	Keep bool
	// OnFatal, if set, is told why the program stops, before the cleanups run.
	OnFatal func(reason string)

	name   string
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	cleanups []func()
	dirs     []string
}

// NewProgram is the TB of a program called name, logging to log.
func NewProgram(name string, log *slog.Logger) *Program {
	ctx, cancel := context.WithCancel(context.Background())
	return &Program{name: name, log: log, ctx: ctx, cancel: cancel}
}

// Close runs the cleanups, last registered first, and removes the temporary directories.
func (p *Program) Close() {
	p.cancel()
	p.mu.Lock()
	fns, dirs := p.cleanups, p.dirs
	p.cleanups, p.dirs = nil, nil
	p.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	for _, d := range dirs {
		if p.Keep {
			p.log.Info("kept", "dir", d)
			continue
		}
		_ = os.RemoveAll(d)
	}
}

func (p *Program) Helper()                  {}
func (p *Program) Name() string             { return p.name }
func (p *Program) Context() context.Context { return p.ctx }
func (p *Program) Log(args ...any)          { p.log.Info(fmt.Sprint(args...)) }
func (p *Program) Logf(f string, args ...any) {
	p.log.Info(fmt.Sprintf(f, args...))
}
func (p *Program) Error(args ...any)            { p.log.Error(fmt.Sprint(args...)); p.Fail() }
func (p *Program) Errorf(f string, args ...any) { p.log.Error(fmt.Sprintf(f, args...)); p.Fail() }
func (p *Program) Fatal(args ...any)            { p.fatal(fmt.Sprint(args...)) }
func (p *Program) Fatalf(f string, args ...any) { p.fatal(fmt.Sprintf(f, args...)) }

func (p *Program) fatal(reason string) {
	p.log.Error(reason)
	if p.OnFatal != nil {
		p.OnFatal(reason)
	}
	p.FailNow()
}

// Fail marks the program failed.
func (p *Program) Fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
}

// FailNow runs the cleanups and exits 1.
func (p *Program) FailNow() {
	p.Fail()
	p.Close()
	os.Exit(1)
}

// Failed reports whether an error was reported.
func (p *Program) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// Cleanup registers fn to run at Close.
func (p *Program) Cleanup(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, fn)
}

// TempDir makes a new directory, removed at Close.
func (p *Program) TempDir() string {
	d, err := os.MkdirTemp("", p.name+"-")
	if err != nil {
		p.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirs = append(p.dirs, d)
	return d
}

// Setenv sets an environment variable of the program.
func (p *Program) Setenv(key, value string) {
	if err := os.Setenv(key, value); err != nil {
		p.Fatal(err)
	}
}
