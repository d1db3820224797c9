package store

import (
	"context"
	"sync"
	"time"
)

// The barrier of the policies view. A command stored at t must be judged by every revision the
// bucket stored up to t, however far behind the view's consumer is. A round asks the bucket for
// its last sequence and waits until the view has applied it: the answer comes after every
// command this process had received when it asked, so the view then holds every revision
// stored before those commands (a revision stored later has a later time). A round therefore
// covers the newest stored time among the commands waiting when it starts, and commands that
// come meanwhile wait for the next round: under load one round serves many commands, and
// a command stored before a finished round's cover (a backlog, a redelivery) waits for none.
//
// Stored times come from two streams, the commands' and the bucket's: on one server they are
// one clock; in a cluster, the clocks of their leaders, which NTP keeps within milliseconds.

type barrier struct {
	mu       sync.Mutex
	complete time.Time // the view holds every revision stored at or before this
	running  *round
	queued   *round
}

type round struct {
	covers time.Time
	done   chan struct{}
	err    error
}

// barrierTimeout bounds one round: a view that cannot catch up in this time fails the
// commands waiting on it (the function retries them).
const barrierTimeout = 10 * time.Second

// await returns once the view holds every revision stored at or before t.
func (p *Policies) await(ctx context.Context, t time.Time) error {
	b := &p.barrier
	b.mu.Lock()
	if !t.After(b.complete) {
		b.mu.Unlock()
		return nil
	}
	r := b.running
	if r == nil || r.covers.Before(t) {
		if b.queued == nil {
			b.queued = &round{done: make(chan struct{})}
		}
		r = b.queued
		r.covers = later(r.covers, t)
		if b.running == nil {
			p.startRoundLocked()
		}
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startRoundLocked runs the queued round; the next one starts when it ends.
func (p *Policies) startRoundLocked() {
	b := &p.barrier
	r := b.queued
	b.queued, b.running = nil, r
	go func() {
		ctx, cancel := context.WithTimeout(p.life, barrierTimeout)
		err := p.catchUp(ctx)
		cancel()
		b.mu.Lock()
		defer b.mu.Unlock()
		if err == nil {
			b.complete = later(b.complete, r.covers)
		}
		r.err = err
		close(r.done)
		b.running = nil
		if b.queued != nil {
			p.startRoundLocked()
		}
	}()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
