package function

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The fence and the hand-over of a pinned consumer: a replica given the pin runs nothing new
// until every message still out to the previous holder is settled or back in its hand, and a
// replica that stops hands its pin over at once.

// ErrNotPinned is returned when a keyed function's consumer is not pinned to one client.
var ErrNotPinned = errors.New("consumer must use the pinned_client priority policy")

// HeaderPinID carries the pin under which the server delivered a message.
const HeaderPinID = "Nats-Pin-Id"

// fenceCheckEvery is how often a fenced consumer asks the server whether the previous pin
// holder's messages are settled.
const fenceCheckEvery = 50 * time.Millisecond

// lift waits until every message the consumer has out is in this replica's hand, then lets
// the fenced messages run, in stream order. The check counts only if it was made after the
// newest pin was assigned (a message under it had arrived), so a pin that moves again while
// it runs makes it check again.
func (k *keyed) lift() {
	defer k.wg.Done()
	for {
		k.mu.Lock()
		pin := k.newestPinLocked()
		// Only messages in hand before the server counts, and still in hand after, may be
		// matched against its count: one that arrives meanwhile, or is settled meanwhile, may
		// or may not be in it.
		before := make(map[uint64]*keyedEntry, len(k.held))
		maps.Copy(before, k.held)
		k.mu.Unlock()
		info, err := k.cons.Info(k.ctx)
		k.mu.Lock()
		inHand := 0
		for seq, e := range before {
			// One that runs may have sent its ack already: the server may not count it.
			if k.held[seq] == e && !e.running {
				inHand++
			}
		}
		if err == nil && pinnedID(info, k.group) != pin && k.newestPinLocked() == pin {
			// The pin moved on before the fence lifted: give the fenced messages back, so that
			// the replica holding the pin now gets them (two replicas each waiting for the
			// other's messages would wait forever).
			k.r.log.Debug("fence: pin moved on; releasing fenced messages", "consumer", k.name, "fenced", len(k.fenced))
			for _, e := range k.fenced {
				_ = e.raw.Nak()
				delete(k.held, e.msg.Seq)
				e.lease.release()
			}
			k.fenced, k.checking = nil, false
			k.signalIdleLocked()
			k.mu.Unlock()
			return
		}
		if err == nil && info.NumAckPending <= inHand && k.newestPinLocked() == pin {
			slices.SortFunc(k.fenced, func(a, b *keyedEntry) int { return cmp.Compare(a.msg.Seq, b.msg.Seq) })
			for _, e := range k.fenced {
				k.admitLocked(e)
			}
			k.fenced, k.pin, k.checking = nil, pin, false
			k.mu.Unlock()
			return
		}
		if err != nil {
			k.r.log.Debug("fence: consumer info", "consumer", k.name, "err", err)
		} else {
			k.r.log.Debug("fence: waiting for messages held elsewhere", "consumer", k.name, "ack_pending", info.NumAckPending, "in_hand", inHand)
		}
		k.mu.Unlock()
		if !sleep(k.ctx, fenceCheckEvery) {
			k.mu.Lock()
			k.checking = false
			k.mu.Unlock()
			return // shutting down: the fenced messages go back to the server
		}
	}
}

func (k *keyed) newestPinLocked() string {
	if len(k.fenced) == 0 {
		return k.pin
	}
	return k.fenced[len(k.fenced)-1].raw.Headers().Get(HeaderPinID)
}

// pinnedID is the client the consumer is pinned to in group, "" when none.
func pinnedID(info *jetstream.ConsumerInfo, group string) string {
	for _, g := range info.PriorityGroups {
		if g.Group == group {
			return g.PinnedClientID
		}
	}
	return ""
}

// close stops the keep-alive, waits for the handlers (which the handler context bounds) and
// hands the pin over at once if this replica still holds it, instead of making the next
// replica wait for the pinned TTL.
func (k *keyed) close(ctx context.Context) {
	k.mu.Lock()
	k.closed = true // no callback starts work from here on
	k.mu.Unlock()
	close(k.stop)
	k.endLife()
	k.wg.Wait()
	k.mu.Lock()
	pin := k.pin
	k.mu.Unlock()
	if pin == "" {
		return
	}
	info, err := k.cons.Info(ctx)
	if err != nil {
		return
	}
	if pinnedID(info, k.group) == pin {
		if err := k.r.unpin(ctx, k); err != nil {
			k.r.log.Debug("unpin", "consumer", k.name, "err", err)
		}
	}
}

// unpin releases k's consumer: the server pins it to the next replica that pulls.
func (r *runner) unpin(ctx context.Context, k *keyed) error {
	s, err := r.js.Stream(ctx, r.cfg.Stream)
	if err != nil {
		return err
	}
	return s.UnpinConsumer(ctx, k.name, k.group)
}

// pinnedHere reports whether info shows the consumer pinned to this replica.
func (k *keyed) pinnedHere(info *jetstream.ConsumerInfo) bool {
	k.mu.Lock()
	mine := []string{k.pin, k.newestPinLocked()}
	k.mu.Unlock()
	id := pinnedID(info, k.group)
	return id != "" && slices.Contains(mine, id)
}
