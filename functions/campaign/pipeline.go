package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/store"
)

// pipeline publishes messages with many in flight at once, never one round trip after
// another, and reports each one's result, in the order they were added, to done.
type pipeline struct {
	js     jetstream.JetStream
	window int
	done   func(i int, ack *jetstream.PubAck, err error)
	out    []inFlight
}

type inFlight struct {
	i   int
	fut jetstream.PubAckFuture
}

// ackTimeout bounds the wait for one publish's acknowledgement.
const ackTimeout = 30 * time.Second

func newPipeline(js jetstream.JetStream, window int, done func(int, *jetstream.PubAck, error)) *pipeline {
	return &pipeline{js: js, window: max(window, 1), done: done}
}

// add publishes m as the i-th message, waiting for the oldest when window are out.
func (p *pipeline) add(ctx context.Context, i int, m *nats.Msg, opts ...jetstream.PublishOpt) error {
	for len(p.out) >= p.window {
		if err := p.settle(ctx); err != nil {
			return err
		}
	}
	fut, err := p.js.PublishMsgAsync(m, opts...)
	if err != nil {
		p.done(i, nil, err)
		return nil
	}
	p.out = append(p.out, inFlight{i: i, fut: fut})
	return nil
}

// settle waits for the oldest message out.
func (p *pipeline) settle(ctx context.Context) error {
	f := p.out[0]
	p.out = p.out[1:]
	t := time.NewTimer(ackTimeout)
	defer t.Stop()
	select {
	case ack := <-f.fut.Ok():
		p.done(f.i, ack, nil)
	case err := <-f.fut.Err():
		p.done(f.i, nil, err)
	case <-t.C:
		p.done(f.i, nil, fmt.Errorf("publish %s: %w", f.fut.Msg().Subject, context.DeadlineExceeded))
	case <-ctx.Done():
		p.done(f.i, nil, ctx.Err())
		return ctx.Err()
	}
	return nil
}

// wait settles every message out.
func (p *pipeline) wait(ctx context.Context) error {
	for len(p.out) > 0 {
		if err := p.settle(ctx); err != nil {
			return err
		}
	}
	return nil
}

// isConflict reports a write refused because the subject moved on (a compare-and-swap).
func isConflict(err error) bool { return store.WrongLastSequence(err) }
