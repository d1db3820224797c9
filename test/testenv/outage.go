package testenv

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrInjected is the failure an Outage injects.
var ErrInjected = errors.New("injected: bucket unreachable")

// Outage wraps a record store and makes its reads fail while Down is set, as when the bucket is
// unreachable.
type Outage struct {
	command.Records
	Down atomic.Bool
}

// Get fails with ErrInjected while the outage lasts.
func (o *Outage) Get(ctx context.Context, key string) (domain.Record, uint64, error) {
	if o.Down.Load() {
		return domain.Record{}, 0, ErrInjected
	}
	return o.Records.Get(ctx, key)
}

// StartCommandsOverOutage runs the command function on js until the test ends, reading the
// bucket through the returned Outage: while it is down, a command is dead-lettered on its
// second delivery (a delivery budget of 2), after a quick retry.
func StartCommandsOverOutage(t testing.TB, js jetstream.JetStream) *Outage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, js)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rec := &Outage{Records: st}
	fn, err := command.New(ctx, js, command.Config{Records: rec, MaxDeliver: 2, Log: Quiet()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rc := fn.RuntimeConfig()
	rc.Backoff = []time.Duration{10 * time.Millisecond}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = function.Run(ctx, js, rc) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rec
}
