package testenv

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"maintsignals/infra/provision"
)

// Context ends after d, or when the test ends, whichever comes first.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it holds; the test fails if within passes first, naming what it
// waited for.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Quiet is a logger that drops everything, for code under test whose logs would only be noise.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// WithTick provisions the schedule to tick every d.
func WithTick(d time.Duration) Option { return func(c *provision.Config) { c.Tick = d } }
