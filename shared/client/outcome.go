package client

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
)

// awaitedOutcome is how the outcome event of one sent command is recognised: the policy and the
// subscription commands are answered alike, each on its own subject with its own event type.
type awaitedOutcome[E any] struct {
	id     string                          // the command's id
	decode func([]byte) (E, error)         // an outcome event's body
	idOf   func(E) string                  // the command id an event answers
	last   func(context.Context) (E, bool) // the last outcome of the command's key, if it reads
	// late is the error when ctx ends first (it wraps ErrNoOutcome).
	late func() error
}

// awaitOutcome waits on sub for the outcome of the command. A republished command's outcome
// may be out already, before the subscription: the last of its key, if it answers this command.
func awaitOutcome[E any](ctx context.Context, sub *nats.Subscription, republished bool, o awaitedOutcome[E]) (E, error) {
	if republished {
		if ev, ok := o.last(ctx); ok && o.idOf(ev) == o.id {
			return ev, nil
		}
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			var zero E
			if ctx.Err() != nil {
				return zero, o.late()
			}
			return zero, fmt.Errorf("wait for outcome of %s: %w", o.id, err)
		}
		if ev, err := o.decode(m.Data); err == nil && o.idOf(ev) == o.id {
			return ev, nil
		}
	}
}
