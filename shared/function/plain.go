package function

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// held is a message handed to a worker, kept alive from the moment the callback received it.
type held struct {
	msg  jetstream.Msg
	stop func()
}

// plain serves one consumer without key order: Concurrency workers take messages off a queue
// that the consume callback fills.
type plain struct {
	q       chan held
	workers sync.WaitGroup
	// sending is held (read) by the consume callback while it hands a message over, so that
	// the queue is closed only when no callback is sending on it.
	sending sync.RWMutex
	closed  bool
}

// drained closes the queue, once no callback is sending, and waits for the workers to settle
// what they hold (the handler context bounds them).
func (p *plain) drained(context.Context) {
	p.sending.Lock()
	if !p.closed {
		p.closed = true
		close(p.q)
	}
	p.sending.Unlock()
	p.workers.Wait()
}

// close has nothing left to do once drained.
func (p *plain) close(context.Context) {}

// enqueue hands msg to the workers. It may wait for a free slot, so the message is kept alive
// from here on: while it waits behind slow handlers, its ack wait must not run out.
func (p *plain) enqueue(msg jetstream.Msg, ackWait time.Duration) {
	p.sending.RLock()
	defer p.sending.RUnlock()
	if p.closed {
		return // stopped: the server redelivers it after the ack wait
	}
	p.q <- held{msg: msg, stop: keepAlive(msg, ackWait)}
}

func (r *runner) consumePlain(ctx, hctx context.Context, name string) (*plain, jetstream.ConsumeContext, error) {
	cons, ackWait, err := r.consumer(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	// The callback only hands the message over; the buffer holds what one pull may bring. When
	// every worker is busy the callback waits, with the message kept alive (see enqueue).
	p := &plain{q: make(chan held, r.cfg.Concurrency)}
	for i := 0; i < r.cfg.Concurrency; i++ {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for h := range p.q {
				r.process(hctx, name, h.msg, h.stop)
			}
		}()
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) { p.enqueue(msg, ackWait) },
		// A pull of one message at a time stalls now and then until the pull expires (seen with
		// nats.go v1.55); a little more headroom avoids it. With MaxAckPending equal to the
		// concurrency (as provisioned) the server never sends more than the workers can take.
		jetstream.PullMaxMessages(r.cfg.Concurrency+2),
		jetstream.PullExpiry(10*time.Second),
		r.consumeErrors(name))
	if err != nil {
		p.drained(hctx)
		return nil, nil, fmt.Errorf("function %s: consume %s: %w", r.cfg.Name, name, err)
	}
	return p, cc, nil
}

// process runs the handler on one message and settles it.
func (r *runner) process(ctx context.Context, consumer string, raw jetstream.Msg, stop func()) {
	msg := toMessage(raw, consumer)
	start := time.Now()
	err := r.attempt(ctx, msg)
	// Settling can take a few calls (a dead letter and its outcome): keep the message alive
	// until it is settled, so that no other replica gets it meanwhile.
	result := r.settle(ctx, raw, msg, err, false)
	stop()
	r.metrics.record(ctx, r.cfg.Stream, consumer, result, err, time.Since(start))
}

// keepAlive tells the server the message is in progress more often than the ack wait, until
// stop is called.
func keepAlive(msg jetstream.Msg, ackWait time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}
