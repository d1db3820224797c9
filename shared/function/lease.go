package function

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// release ends the handler context of a message settled, or given back, or never run: a
// context not ended stays among its parent's children for good, about a kilobyte per message.
func (l *lease) release() { l.cancel(nil) }

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

// keepAlive keeps the messages in hand this replica's, and gives up those that are not any
// more. Every fifth of the ack wait it:
//   - gives up every message when the connection is down or was re-established since the
//     message came (whatever was sent on the old connection may or may not have arrived);
//   - gives up a key's messages when one of them is past its lease;
//   - sends a keep-alive for each message held longer than a fifth of the ack wait, as a
//     request that the consumer's leader answers: an answer that comes back within the lease
//     extends it to the ack wait after the keep-alive was sent, an unanswered one (a server cut
//     off from the consumer's leader) lets the lease run out.
func (k *keyed) keepAlive() {
	defer k.wg.Done()
	every := k.ackWait / 5
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case now := <-t.C:
			conn, up := k.r.reconnects(), k.r.connected()
			k.abandon(func(e *keyedEntry) bool { return !up || e.conn != conn }, errConnectionLost)
			k.mu.Lock()
			expired := map[string]bool{}
			var due []*keyedEntry
			for _, e := range k.held {
				switch {
				case now.After(e.lease.until()):
					expired[e.key] = true
				case now.Sub(e.received) >= every:
					due = append(due, e)
				}
			}
			k.mu.Unlock()
			if len(expired) > 0 {
				k.abandon(func(e *keyedEntry) bool { return expired[e.key] }, errLeaseExpired)
			}
			for _, e := range due {
				k.wg.Add(1)
				go k.renew(e)
			}
		}
	}
}

// renew sends one keep-alive for e and extends its lease if the answer comes in time.
func (k *keyed) renew(e *keyedEntry) {
	defer k.wg.Done()
	sent := time.Now()
	if e.ctx.Err() != nil {
		return // given up: its keep-alives must stop, so that the server gives it out again
	}
	// Bounded by the lease, and by the consumer's life: no keep-alive outlives close.
	ctx, cancel := context.WithDeadline(k.life, e.lease.until())
	defer cancel()
	defer context.AfterFunc(e.ctx, cancel)()
	if _, err := k.r.js.Conn().RequestWithContext(ctx, e.raw.Reply(), ackProgress); err != nil {
		return // the lease runs out unless a later keep-alive is answered
	}
	if time.Now().Before(e.lease.until()) {
		e.lease.extend(sent.Add(k.ackWait - k.leaseMargin()))
	}
}

// ackProgress is JetStream's "work in progress" acknowledgement.
var ackProgress = []byte("+WPI")

// leaseMargin is what a lease keeps back from the ack wait: the time a message or a keep-alive
// may take between the server and this replica.
func (k *keyed) leaseMargin() time.Duration { return k.ackWait / 4 }

// abandon gives up the messages in hand that match: it ends the leases of those that run
// (their handlers stop before committing and leave them unsettled) and drops the others; the
// server gives them out again after their ack wait. A key whose message is given up gives up
// the messages behind it too, so that none overtakes it.
func (k *keyed) abandon(match func(*keyedEntry) bool, cause error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := map[string]bool{}
	for _, e := range k.held {
		if match(e) && e.ctx.Err() == nil {
			keys[e.key] = true
		}
	}
	if len(keys) == 0 {
		return
	}
	n := 0
	for seq, e := range k.held {
		if !keys[e.key] {
			continue
		}
		n++
		e.lease.lose(cause)
		if e.running {
			continue // its run cleans up its key
		}
		delete(k.held, seq)
	}
	drop := func(e *keyedEntry) bool { return keys[e.key] && !e.running }
	for key := range keys {
		if q := slices.DeleteFunc(k.queues[key], drop); len(q) > 0 {
			k.queues[key] = q
		} else {
			delete(k.queues, key)
		}
	}
	k.ready = slices.DeleteFunc(k.ready, drop)
	k.fenced = slices.DeleteFunc(k.fenced, drop)
	k.fenceNextLocked()
	k.r.log.Warn("giving up messages this replica no longer holds", "consumer", k.name, "messages", n, "keys", len(keys), "cause", cause)
	k.signalIdleLocked()
}
