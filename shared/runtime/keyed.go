package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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

// ErrNotPinned is returned when a keyed function's consumer is not pinned to one client.
var ErrNotPinned = errors.New("consumer must use the pinned_client priority policy")

// HeaderPinID carries the pin under which the server delivered a message.
const HeaderPinID = "Nats-Pin-Id"

// fenceCheckEvery is how often a fenced consumer asks the server whether the previous pin
// holder's messages are settled.
const fenceCheckEvery = 50 * time.Millisecond

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
		return // stopped: the server redelivers it
	}
	if _, dup := k.held[msg.Seq]; dup {
		return // a redelivery of a message in hand: the copy in hand is settled
	}
	if e.conn != k.conn {
		// The first message on a new connection. Messages the server sent on the old one may
		// never have arrived: they come back only after their ack wait, while newer ones of
		// their keys come now. Fence, as for a new pin, until they are back in hand.
		k.conn, k.pin = e.conn, ""
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
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running--
	q := slices.DeleteFunc(k.queues[e.key], func(w *keyedEntry) bool { return w == e })
	delete(k.held, e.msg.Seq)
	if !settled {
		// Shutting down before the message was settled: everything of its key behind it goes
		// back to the server too, which redelivers them in order.
		for _, w := range q {
			delete(k.held, w.msg.Seq)
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

func (k *keyed) signalIdleLocked() {
	if len(k.held) == 0 {
		close(k.idle)
		k.idle = make(chan struct{})
	}
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
	// What was given up comes back only after its ack wait, while newer messages of its keys
	// may come at once (the pin is still this replica's): fence whatever comes from here on,
	// as for a new pin, so that it runs only with the given-up messages back in hand, in order.
	k.pin = ""
	k.r.log.Warn("giving up messages this replica no longer holds", "consumer", k.name, "messages", n, "keys", len(keys), "cause", cause)
	k.signalIdleLocked()
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

// processInPlace runs the handler on one message, retrying a retryable failure in place with
// backoff, and settles it. It reports false when shutdown came first and the message is left
// to redelivery.
func (r *runner) processInPlace(ctx context.Context, consumer string, raw jetstream.Msg, msg Message) bool {
	start := time.Now()
	var err error
	for {
		err = r.attempt(ctx, msg)
		if err == nil || errors.Is(err, ErrPermanent) || msg.Delivered >= uint64(r.cfg.MaxDeliver) {
			break
		}
		delay := r.backoff(msg.Delivered)
		r.log.Warn("handler failed; retrying in place", "subject", msg.Subject, "seq", msg.Seq, "delivery", msg.Delivered, "err", err, "retry_in", delay)
		r.metrics.record(ctx, r.cfg.Stream, consumer, resultRetry, err, time.Since(start))
		if !sleep(ctx, delay) {
			return false
		}
		start = time.Now()
		msg.Delivered++
	}
	if Holding(ctx) != nil {
		return false // no longer ours: whoever has it now settles it
	}
	for {
		result := r.settle(ctx, raw, msg, err, true)
		if result != resultRetry {
			r.metrics.record(ctx, r.cfg.Stream, consumer, result, err, time.Since(start))
			return true
		}
		// The dead letter itself failed: keep the message (and its key) here and try again.
		if !sleep(ctx, r.backoff(msg.Delivered)) {
			return false
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pinnedHere reports whether info shows the consumer pinned to this replica.
func (k *keyed) pinnedHere(info *jetstream.ConsumerInfo) bool {
	k.mu.Lock()
	mine := []string{k.pin, k.newestPinLocked()}
	k.mu.Unlock()
	id := pinnedID(info, k.group)
	return id != "" && slices.Contains(mine, id)
}

// balance spreads the pins over the replicas. A replica that starts first (or reconnects
// first) is pinned to every partition; every period, a replica holding more than its share
// releases one, which goes to a replica waiting for it. The number of replicas is read from the
// pull requests waiting on the consumers: every replica keeps one on each.
func (r *runner) balance(ctx context.Context, ks []*keyed, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		replicas := -1 // the fewest pull requests waiting on any consumer
		var mine []*keyed
		for _, k := range ks {
			info, err := k.cons.Info(ctx)
			if err != nil {
				r.log.Debug("balance: consumer info", "consumer", k.name, "err", err)
				replicas = -1
				break
			}
			if replicas < 0 || info.NumWaiting < replicas {
				replicas = info.NumWaiting
			}
			if k.pinnedHere(info) {
				mine = append(mine, k)
			}
		}
		if replicas < 2 {
			continue
		}
		share := (len(ks) + replicas - 1) / replicas
		if len(mine) <= share {
			continue
		}
		k := mine[len(mine)-1]
		err := r.unpin(ctx, k)
		r.log.Info("balance: releasing a partition to another replica", "consumer", k.name, "pinned_here", len(mine), "replicas", replicas, "err", err)
	}
}
