package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// A replica holds a message it was given only as long as the server would not give it to
// another replica: until the ack wait runs out after the last sign of progress that the server
// is known to have received. That is the message's lease. A replica that loses it (cut off from
// NATS, or its keep-alives unanswered, as on a server cut off from the rest of the cluster)
// must not commit anything for the message: another replica may be handling it. A pin that
// moves on is not a lost lease: the replica given the pin waits for the messages still out to
// this one (keyed.go, the fence), so finishing them while their lease holds is the hand-over.
// The lease only spares work; what keeps a late commit harmless is the store (store.Put) and
// the command function's decision (functions/command, decide.go).

// ErrLeaseLost is the cause of a handler context whose message this replica no longer holds.
var ErrLeaseLost = errors.New("message no longer held by this replica")

// Causes of a lost lease, each wrapping ErrLeaseLost.
var (
	errLeaseExpired   = fmt.Errorf("%w: lease expired without an answered keep-alive", ErrLeaseLost)
	errConnectionLost = fmt.Errorf("%w: connection to NATS lost", ErrLeaseLost)
)

type leaseKey struct{}

// lease is the time until which a message is surely still this replica's.
type lease struct {
	end    atomic.Int64 // Unix nanoseconds
	cancel context.CancelCauseFunc
}

// newLease returns a handler context for a message held until end; the context ends when the
// lease is lost.
func newLease(parent context.Context, end time.Time) (context.Context, *lease) {
	ctx, cancel := context.WithCancelCause(parent)
	l := &lease{cancel: cancel}
	l.end.Store(end.UnixNano())
	return context.WithValue(ctx, leaseKey{}, l), l
}

// extend moves the lease's end forward (never back).
func (l *lease) extend(to time.Time) {
	for {
		cur := l.end.Load()
		if to.UnixNano() <= cur || l.end.CompareAndSwap(cur, to.UnixNano()) {
			return
		}
	}
}

func (l *lease) until() time.Time { return time.Unix(0, l.end.Load()) }

// lose ends the lease for cause.
func (l *lease) lose(cause error) { l.cancel(cause) }

// Holding reports whether the message whose handler context is ctx is still this replica's:
// nil if so (or if ctx carries no lease, outside the runtime), else why not, wrapping
// ErrLeaseLost. A handler calls it right before it commits.
func Holding(ctx context.Context) error {
	l, ok := ctx.Value(leaseKey{}).(*lease)
	if !ok {
		return nil
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if time.Now().After(l.until()) {
		l.lose(errLeaseExpired)
		return errLeaseExpired
	}
	return nil
}
