package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/natsconn"
)

// CommandResult is what became of a sent command C (a policy or a subscription command),
// answered by an outcome event E.
type CommandResult[C, E any] struct {
	Command C
	// Seq is the command's sequence in its stream; Republished: the stream already held this
	// id (published again inside the duplicate window).
	Seq         uint64
	Republished bool
	Event       E
}

// sendAwaiting publishes msg, the command cmd, and waits on the subject outcomes for its
// outcome as o says; failed is the error of an outcome that failed, nil for one that did
// not. A subject this user may not publish to is a *natsconn.PermissionError at once, with no
// result.
func sendAwaiting[C, E any](ctx context.Context, c *Client, cmd C, msg *nats.Msg, outcomes string, o awaitedOutcome[E], failed func(E) error) (*CommandResult[C, E], error) {
	var res *CommandResult[C, E]
	err := c.publishAwaiting(ctx, awaitedCommand(o.id, outcomes), msg, func(ctx context.Context, sub *nats.Subscription, ack *jetstream.PubAck) error {
		res = &CommandResult[C, E]{Command: cmd, Seq: ack.Sequence, Republished: ack.Duplicate}
		ev, err := awaitOutcome(ctx, sub, ack, o)
		if err != nil {
			return err
		}
		res.Event = ev
		return failed(ev)
	})
	if errors.As(err, new(*natsconn.PermissionError)) {
		return nil, err
	}
	return res, err
}

// awaitedOutcome is how the outcome event of one sent command is recognised: the policy and the
// subscription commands are answered alike, each on its own subject with its own event type.
type awaitedOutcome[E any] struct {
	id     string                          // the command's id
	decode func([]byte) (E, error)         // an outcome event's body
	idOf   func(E) string                  // the command id an event answers
	last   func(context.Context) (E, bool) // the last outcome of the command's key, if it reads
	// late is the error when ctx ends first (it wraps ErrNoOutcome), of the command stored at
	// seq.
	late func(seq uint64) error
}

// awaitOutcome waits on sub for the outcome of the command. A republished command's outcome
// may be out already, before the subscription: the last of its key, if it answers this command.
func awaitOutcome[E any](ctx context.Context, sub *nats.Subscription, ack *jetstream.PubAck, o awaitedOutcome[E]) (E, error) {
	if ack.Duplicate {
		if ev, ok := o.last(ctx); ok && o.idOf(ev) == o.id {
			return ev, nil
		}
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			var zero E
			if ctx.Err() != nil {
				return zero, o.late(ack.Sequence)
			}
			return zero, fmt.Errorf("wait for outcome of %s: %w", o.id, err)
		}
		if ev, err := o.decode(m.Data); err == nil && o.idOf(ev) == o.id {
			return ev, nil
		}
	}
}
