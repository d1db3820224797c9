package testenv

import (
	"context"
	"errors"
	"sync/atomic"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// Records is the record store a command function reads and writes.
type Records interface {
	Get(ctx context.Context, key string) (domain.Record, uint64, error)
	Put(ctx context.Context, key string, prev store.Versioned, next domain.Record) (uint64, error)
}

// ErrInjected is the failure an Outage injects.
var ErrInjected = errors.New("injected: bucket unreachable")

// Outage wraps a record store and makes its reads fail while Down is set, as when the bucket is
// unreachable.
type Outage struct {
	Records
	Down atomic.Bool
}

// Get fails with ErrInjected while the outage lasts.
func (o *Outage) Get(ctx context.Context, key string) (domain.Record, uint64, error) {
	if o.Down.Load() {
		return domain.Record{}, 0, ErrInjected
	}
	return o.Records.Get(ctx, key)
}
