package function

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Keyed consumption: a consumer pinned to one replica at a time (priority policy
// pinned_client) delivers up to MaxAckPending messages ahead, and the replica runs messages of
// different keys at once and messages of one key one at a time, in stream order. A retryable
// failure is retried in place, so that nothing of its key overtakes it.
//
// The pin can move (a replica stops, stalls past the pinned TTL, or the consumer changes
// leader) while the previous holder still has messages in hand. Messages received under a pin
// not seen before are therefore fenced: they wait until the consumer's pending acks are all in
// this replica's hand (the previous holder settled them, or they expired and came here), and
// then run in stream order with them.

type keyedEntry struct {
	raw      jetstream.Msg
	msg      Message
	key      string
	received time.Time
	ctx      context.Context // the handler's, ended when the lease is lost
	lease    *lease
	conn     uint64 // the connection's reconnect count when it came
	running  bool   // handed to a goroutine
	readied  bool   // heads its key and waits in ready for a free slot
}

// keyed serves one pinned consumer.
type keyed struct {
	r       *runner
	name    string
	cons    jetstream.Consumer
	group   string
	ackWait time.Duration
	ctx     context.Context // handler context

	mu       sync.Mutex
	held     map[uint64]*keyedEntry   // received and not settled, by stream sequence
	queues   map[string][]*keyedEntry // per key, in stream order; the head runs
	ready    []*keyedEntry            // heads waiting for a free slot
	running  int
	pin      string        // the pin whose messages run without a fence
	conn     uint64        // the connection (reconnect count) messages last came on
	fenced   []*keyedEntry // received under a new pin, waiting for the check
	checking bool
	closed   bool
	idle     chan struct{} // closed and replaced whenever held becomes empty
	wg       sync.WaitGroup
	stop     chan struct{}
	life     context.Context // ends when the consumer closes
	endLife  context.CancelFunc
}

func (r *runner) consumeKeyed(ctx, hctx context.Context, name string) (*keyed, jetstream.ConsumeContext, error) {
	cons, ackWait, err := r.consumer(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	cfg := cons.CachedInfo().Config
	if cfg.PriorityPolicy != jetstream.PriorityPolicyPinned || len(cfg.PriorityGroups) == 0 {
		return nil, nil, fmt.Errorf("function %s: consumer %s/%s: %w (run provisioning again)", r.cfg.Name, r.cfg.Stream, name, ErrNotPinned)
	}
	k := &keyed{
		r: r, name: name, cons: cons, group: cfg.PriorityGroups[0], ackWait: ackWait, ctx: hctx,
		held: map[uint64]*keyedEntry{}, queues: map[string][]*keyedEntry{},
		idle: make(chan struct{}), stop: make(chan struct{}),
	}
	k.life, k.endLife = context.WithCancel(context.WithoutCancel(hctx))
	k.conn = r.reconnects()
	window := max(cfg.MaxAckPending, 1)
	// The pull expires well inside the pinned TTL: a pinned replica that is alive renews its
	// pin even when there is nothing to deliver.
	expiry := 10 * time.Second
	if cfg.PinnedTTL > 0 {
		expiry = max(cfg.PinnedTTL*2/5, time.Second)
	}
	k.wg.Add(1)
	go k.keepAlive()
	cc, err := cons.Consume(k.receive,
		jetstream.PullPriorityGroup(k.group),
		jetstream.PullMaxMessages(window),
		jetstream.PullExpiry(expiry),
		r.consumeErrors(name))
	if err != nil {
		close(k.stop)
		k.endLife()
		k.wg.Wait()
		return nil, nil, fmt.Errorf("function %s: consume %s: %w", r.cfg.Name, name, err)
	}
	return k, cc, nil
}

// receive is the consume callback: it only files the message; it never blocks.
func (k *keyed) receive(raw jetstream.Msg) {
	e := k.entry(raw)
	msg := e.msg
	pin := raw.Headers().Get(HeaderPinID)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		e.lease.release()
		return // stopped: the server redelivers it
	}
	if _, dup := k.held[msg.Seq]; dup {
		e.lease.release()
		return // a redelivery of a message in hand: the copy in hand is settled
	}
	if e.conn != k.conn {
		// The first message on a new connection. Messages the server sent on the old one may
		// never have arrived: they come back only after their ack wait, while newer ones of
		// their keys come now. Fence, as for a new pin, until they are back in hand.
		k.conn = e.conn
		k.fenceNextLocked()
	}

	k.held[msg.Seq] = e
	if pin != k.pin || len(k.fenced) > 0 {
		k.fenced = append(k.fenced, e)
		if !k.checking {
			k.checking = true
			k.wg.Add(1)
			go k.lift()
		}
		return
	}
	k.admitLocked(e)
}

// entry files a message just received. The server gave it out at most a moment ago: it is this
// replica's for the ack wait, less a margin for the time it took to get here; answered
// keep-alives extend that.
func (k *keyed) entry(raw jetstream.Msg) *keyedEntry {
	msg := toMessage(raw, k.name)
	now := time.Now()
	e := &keyedEntry{raw: raw, msg: msg, key: k.r.cfg.KeyOf(msg), received: now, conn: k.r.reconnects()}
	e.ctx, e.lease = newLease(k.ctx, now.Add(k.ackWait-k.leaseMargin()))
	return e
}

// admitLocked queues e behind the messages of its key, in stream order, and readies it if it
// heads the queue. A message that comes late (a redelivery with a lower sequence) goes before
// the queued ones it precedes, never before one that already runs; the head it displaces waits
// again.
func (k *keyed) admitLocked(e *keyedEntry) {
	q := k.queues[e.key]
	i := len(q)
	for i > 0 && q[i-1].msg.Seq > e.msg.Seq && !q[i-1].running {
		i--
	}
	if i == 0 && len(q) > 0 && q[0].readied {
		k.ready = slices.DeleteFunc(k.ready, func(w *keyedEntry) bool { return w == q[0] })
		q[0].readied = false
	}
	k.queues[e.key] = slices.Insert(q, i, e)
	if i == 0 {
		k.readyLocked(e)
	}
}

// readyLocked starts e, or queues it for the next free slot.
func (k *keyed) readyLocked(e *keyedEntry) {
	if k.running >= k.r.cfg.Concurrency {
		e.readied = true
		k.ready = append(k.ready, e)
		return
	}
	k.running++
	e.running = true
	k.wg.Add(1)
	go k.run(e)
}

// run handles one message, retrying in place, settles it and starts what it held back.
func (k *keyed) run(e *keyedEntry) {
	defer k.wg.Done()
	settled := k.r.processInPlace(e.ctx, k.name, e.raw, e.msg)
	e.lease.release()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running--
	q := slices.DeleteFunc(k.queues[e.key], func(w *keyedEntry) bool { return w == e })
	delete(k.held, e.msg.Seq)
	if !settled {
		// Shutting down, or the message was given up (its lease lost): everything of its key
		// behind it goes back to the server too.
		k.fenceNextLocked()
		for _, w := range q {
			delete(k.held, w.msg.Seq)
			w.lease.release()
		}
		k.ready = slices.DeleteFunc(k.ready, func(w *keyedEntry) bool { return w.key == e.key })
		q = nil
	}
	if len(q) == 0 {
		delete(k.queues, e.key)
	} else {
		k.queues[e.key] = q
		if !q[0].running && !q[0].readied {
			q[0].readied = true
			k.ready = append(k.ready, q[0])
		}
	}
	for len(k.ready) > 0 && k.running < k.r.cfg.Concurrency {
		next := k.ready[0]
		k.ready = k.ready[1:]
		next.readied = false
		k.readyLocked(next)
	}
	k.signalIdleLocked()
}

// fenceNextLocked fences whatever comes from here on, as for a new pin: a message given up
// comes back only after its ack wait, while newer messages of its key may come at once under
// the same pin and connection; fenced, they run only with it back in hand, in stream order.
func (k *keyed) fenceNextLocked() { k.pin = "" }

func (k *keyed) signalIdleLocked() {
	if len(k.held) == 0 {
		close(k.idle)
		k.idle = make(chan struct{})
	}
}

// drained returns once nothing is held, or when ctx ends.
func (k *keyed) drained(ctx context.Context) {
	for {
		k.mu.Lock()
		n, idle := len(k.held), k.idle
		k.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return
		}
	}
}
