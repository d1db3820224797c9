// Package notices is the function that publishes lifecycle notices (README, Time in the signal): reminders
// before an announced window, due when it starts, overdue when it ends with the entity still
// Pending, and stuck when an update runs too long. It runs on the emitter's tick, from
// durable consumers of its own, one per shard of the tick as the emitter's (README, Sharing a
// tick), with any number of replicas. A run that cannot finish in time starts the next one
// where it stopped, so that no entity always waits.
//
// Exactly once, without a ledger: the stream is the memory. A notice's id is deterministic
// (<key>:<kind>:<series>:<lead>), and each entity's notices come in a fixed order within a
// series, so the last message on maint.notice.<key> says how far its series got. A run reads
// the bucket, and for every entity whose current stage may not be sent yet it reads that
// last message and publishes the next notice with an expected last subject sequence: the
// publish succeeds only if nothing was stored for the entity since the read. Hence:
//   - a replica that dies after deciding and before publishing has stored nothing: the next
//     run decides the same and publishes it;
//   - one that dies after publishing has nothing else to remember: the next run reads the
//     notice back and goes on from there;
//   - two replicas racing on one tick publish at the same expected sequence; one wins, the
//     other's publish is refused (wrong last sequence), it reads again and finds the notice
//     already there.
//
// The notice id is also the message's Nats-Msg-Id, so that the stream drops a copy sent
// twice within its duplicate window whatever the path.
package notices

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/store"
)

// scopeName is the instrumentation scope of the function's metrics.
const scopeName = "maintsignals/functions/notices"

// metricNotices counts published notices by kind.
const metricNotices = "cluster.maintenance.notices"

// Notifier holds the dependencies of the tick handler.
type Notifier struct {
	cfg   Config
	js    jetstream.JetStream
	store *store.Store
	log   *slog.Logger
	count metric.Int64Counter

	// known is, per entity key, the last notice this replica knows to be stored: a notice
	// that is stored stays stored, so when known already covers an entity's current stage the
	// run needs no read. It only saves reads; the stream decides.
	mu    sync.Mutex
	known map[string]memo

	// policies is the view of the customers' policies, synced at the start of each run: the
	// conflicts of announced windows with them.
	policies *store.Policies

	// shards are the shard consumers provisioning created; a replica holding several reads
	// the bucket once for them.
	shards   *function.Shards
	coalesce *function.Coalesce[runResult]
	// from is where the next run starts reading the bucket: where the last one stopped.
	from atomic.Uint64

	hooks hooks
}

// runResult is a run's outcome, the same for each of its shards.
type runResult struct {
	res Result
	err error
}

// hooks let tests stop a run at the points where a crash matters.
type hooks struct {
	beforePublish func(domain.Notice) error
	afterPublish  func(domain.Notice) error
}

// New prepares the function on the provisioned bucket and notices stream.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Notifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("notices: %w", err)
	}
	for _, name := range domain.NoticesStreams() {
		if _, err := js.Stream(ctx, name); err != nil {
			return nil, fmt.Errorf("notices: stream %s (provision first): %w", name, err)
		}
	}
	count, err := cfg.Meters.Meter(scopeName).Int64Counter(metricNotices, metric.WithUnit("{notice}"),
		metric.WithDescription("Lifecycle notices published, by kind."))
	if err != nil {
		return nil, fmt.Errorf("notices metrics: %w", err)
	}
	log := cfg.Logger.With("function", "notices")
	shards, err := function.FindShards(ctx, js, domain.ScheduleStream, domain.NoticesShardPrefix, log)
	if err != nil {
		return nil, fmt.Errorf("notices: %w", err)
	}
	view, err := store.OpenPolicies(ctx, js, log)
	if err != nil {
		return nil, fmt.Errorf("notices: %w", err)
	}
	n := &Notifier{
		cfg: cfg, js: js, store: st, count: count, log: log,
		known: map[string]memo{}, shards: shards, policies: view,
	}
	n.coalesce = &function.Coalesce[runResult]{
		Window: min(100*time.Millisecond, cfg.runTimeout()/20),
		Run: func(ctx context.Context, at time.Time, shards []domain.Shard) []runResult {
			res, err := n.runOnce(ctx, at, shards)
			out := make([]runResult, len(shards))
			for i := range out {
				out[i] = runResult{res, err}
			}
			return out
		},
	}
	return n, nil
}

// RuntimeConfig is how the function runtime serves the notices function: every shard consumer
// of the schedule stream, each pinned to one replica at a time and spread over the replicas,
// one tick at a time, every tick acknowledged (the next tick is the retry of a run that
// failed, deciding again from what is stored).
func (n *Notifier) RuntimeConfig() function.Config {
	return function.Ticks("notices", n.shards.Consumers, n.Handle, n.cfg.runTimeout()+5*time.Second, n.cfg.Logger, n.cfg.Meters)
}

// Run serves ticks until ctx is cancelled (maintctl function notices, maintctl up).
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	n, err := New(ctx, js, cfg)
	if err != nil {
		return function.Starting(ctx, err)
	}
	return function.Run(ctx, js, n.RuntimeConfig())
}

// Handle serves one shard of one tick. It always acknowledges it (returns nil).
func (n *Notifier) Handle(ctx context.Context, msg function.Message) error {
	shard := n.shards.Of(ctx, msg)
	log := n.log.With("shard", shard.Index, "tick_seq", msg.Seq)
	if msg.Pending > 0 {
		log.Debug("tick skipped: a newer tick is waiting", "pending", msg.Pending)
		return nil
	}
	if !n.shards.First(msg) {
		log.Debug("tick skipped: this replica ran it already")
		return nil
	}
	rr, err := n.coalesce.Do(ctx, msg.Seq, cmp.Or(msg.Time, n.cfg.Now()), shard)
	switch {
	case err != nil:
		log.Warn("notices run abandoned: the tick is no longer this replica's", "err", err)
	case rr.err != nil:
		log.Warn("notices run incomplete; the next tick carries on where it stopped", "err", rr.err, "published", rr.res.Published)
	default:
		log.Debug("notices run", "entities", rr.res.Entities, "due", rr.res.Due, "read", rr.res.Read, "published", rr.res.Published)
	}
	return nil
}

// Result describes one run.
type Result struct {
	// Entities read from the bucket; Due, the entities whose current stage this replica did
	// not know to be sent; Read, the last-notice reads; Published, the notices stored.
	Entities, Due, Read, Published int
}

// RunShards is one run of the given shards at the clock's time, as a replica holding them
// makes it on a tick.
func (n *Notifier) RunShards(ctx context.Context, shards []domain.Shard) (Result, error) {
	return n.runOnce(ctx, n.cfg.Now(), shards)
}

// runOnce reads the shards' part of the bucket, from where the last run stopped, and
// publishes every notice that is due at now while it reads.
func (n *Notifier) runOnce(ctx context.Context, now time.Time, shards []domain.Shard) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.runTimeout())
	defer cancel()
	if err := n.policies.Sync(ctx); err != nil {
		// The conflicts are judged on the view as it stands; the next run catches up.
		n.log.Warn("policies not caught up; conflicts judged on the view as it is", "err", err)
	}
	r := &noticesRun{n: n, ctx: ctx, now: now, known: n.snapshot(), learned: map[string]memo{}, work: make(chan entry, workers)}
	r.holds = func(_ string, h uint64) bool {
		return slices.ContainsFunc(shards, func(s domain.Shard) bool { return s.HoldsHash(h) })
	}
	for range workers {
		r.wg.Add(1)
		go r.deliverAll()
	}
	_, err := n.store.Sweep(ctx, domain.CellsOf(shards), n.from.Load(), r.holds, r.entry)
	if err != nil {
		r.undone(place{ord: r.ord + 1, rev: r.lastPos + 1})
		r.fail(fmt.Errorf("notices: read the bucket: %w", err))
	}
	close(r.work)
	r.wg.Wait()
	n.update(r.holds, r.learned, err == nil && ctx.Err() == nil)
	if r.first != nil && r.first.rev != 0 {
		n.from.Store(r.first.rev)
	}
	if ctx.Err() != nil && err == nil {
		r.fail(ctx.Err())
	}
	return r.res, errors.Join(r.errs...)
}

// place is where an entity was met in a sweep: its ordinal, and its position (where to
// sweep from next time to start with it, store.Position).
type place struct {
	ord int
	rev uint64
}

// noticesRun is one run under way: the sweep files the entities whose stage may be due, and
// workers deliver them.
type noticesRun struct {
	n       *Notifier
	ctx     context.Context
	now     time.Time
	holds   func(string, uint64) bool
	known   map[string]memo
	work    chan entry
	wg      sync.WaitGroup
	ord     int
	lastPos uint64

	mu      sync.Mutex
	res     Result
	learned map[string]memo
	errs    []error
	first   *place // the first entity (in sweep order) whose notice may not be out
}

// entry is the sweep's callback for one record of the run's shards.
func (r *noticesRun) entry(e store.Entry, derr error) error {
	r.ord++
	r.lastPos = e.Position
	if derr != nil {
		return nil // the emitter reports records that do not decode
	}
	r.mu.Lock()
	r.res.Entities++
	r.mu.Unlock()
	id := e.Record.ResourceID
	if id == "" {
		id, _ = domain.DecodeKey(e.Key)
		e.Record.ResourceID = id
	}
	now := judgedAt(r.now, e.Stored)
	nt, hasLife := stage(e.Key, e.Record, now, r.n.cfg.Remind, r.n.cfg.StuckAfter)
	c, hasConflict := conflictOf(r.n.policies, e.Key, e.Record, now)
	if !hasLife && !hasConflict {
		return nil
	}
	if m, ok := r.known[e.Key]; ok && m.covers(nt, hasLife, c, hasConflict) {
		r.learn(e.Key, m)
		return nil
	}
	r.mu.Lock()
	r.res.Due++
	r.mu.Unlock()
	en := entry{key: e.Key, rec: e.Record, now: now, at: place{ord: r.ord, rev: e.Position}, conflict: c, hasConflict: hasConflict}
	select {
	case r.work <- en:
		return nil
	case <-r.ctx.Done():
		r.undone(en.at)
		return r.ctx.Err()
	}
}

// deliverAll publishes the due notices of the entities filed, until the sweep is over.
func (r *noticesRun) deliverAll() {
	defer r.wg.Done()
	for e := range r.work {
		if r.ctx.Err() != nil {
			r.undone(e.at)
			continue
		}
		m, reads, published, err := r.n.deliver(r.ctx, e, e.now)
		r.mu.Lock()
		r.res.Read += reads
		r.res.Published += published
		if m != nil {
			r.learned[e.key] = *m
		}
		r.mu.Unlock()
		if err != nil {
			r.undone(e.at)
			r.fail(fmt.Errorf("%s: %w", e.key, err))
		}
	}
}

func (r *noticesRun) learn(key string, s memo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learned[key] = s
}

func (r *noticesRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *noticesRun) undone(p place) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil || p.ord < r.first.ord {
		r.first = &p
	}
}

type entry struct {
	key string
	rec domain.Record
	// now is when the record is judged (judgedAt): the run's time, or later for a record
	// stored after it.
	now time.Time
	at  place
	// conflict is the entity's conflict notice, when hasConflict.
	conflict    domain.Notice
	hasConflict bool
}

func (n *Notifier) snapshot() map[string]memo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.known
}

// update keeps what a run learned of the entities of its shards (held) that have a stage now;
// the others have nothing due and need no memory. A run that did not read all of its shards
// forgets nothing it did not see.
func (n *Notifier) update(held func(string, uint64) bool, learned map[string]memo, complete bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	next := make(map[string]memo, len(n.known))
	for k, s := range n.known {
		if !complete || !held(k, domain.KeyHash(k)) {
			next[k] = s
		}
	}
	maps.Copy(next, learned)
	n.known = next
}

// maxConflicts bounds the re-reads after losing a race on one entity in one run; each lost
// race means another replica stored a notice of the entity, so a few settle it.
const maxConflicts = 5

// deliver publishes the entity's due notices (its lifecycle stage, then its conflict) unless
// the stream already has them, and returns what is stored last for the entity as far as it
// knows (nil if it cannot tell).
func (n *Notifier) deliver(ctx context.Context, e entry, now time.Time) (last *memo, reads, published int, err error) {
	subject := domain.NoticeSubject(e.key)
	for range maxConflicts {
		m, seq, err := n.last(ctx, domain.NoticeStreamOf(e.key), subject)
		reads++
		if err != nil {
			return nil, reads, published, err
		}
		for {
			nt, ok := next(e.key, e.rec, now, n.cfg, e.conflict, e.hasConflict, m)
			if !ok {
				return &m, reads, published, nil // all stored
			}
			stored, raced, err := n.publish(ctx, subject, nt, m, seq)
			if err != nil || stored == 0 && !raced {
				return nil, reads, published, err // failed, or held back
			}
			if raced {
				break // read again
			}
			m, seq = m.with(nt), stored
			published++
		}
	}
	return nil, reads, published, fmt.Errorf("gave up after %d conflicting publishes", maxConflicts)
}

// publish stores nt after the entity's notice at seq (what m says), and returns its sequence;
// raced when another replica stored a notice of the entity first, 0 and no error when the
// stream held it back (the same id stored moments ago).
func (n *Notifier) publish(ctx context.Context, subject string, nt domain.Notice, m memo, seq uint64) (stored uint64, raced bool, err error) {
	if h := n.hooks.beforePublish; h != nil {
		if err := h(nt); err != nil {
			return 0, false, err
		}
	}
	body, err := domain.EncodeNotice(nt)
	if err != nil {
		return 0, false, err
	}
	msg := function.EventMsg(subject, nt.NoticeID, domain.NoticeCEType(string(nt.Kind)), nt.ResourceID, nt.At, body)
	setMemo(msg.Header, nt, m)
	ack, err := n.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(seq))
	if store.WrongLastSequence(err) {
		n.log.Debug("another replica stored a notice of the entity first; reading again", "subject", subject, "notice", nt.NoticeID)
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("publish %s: %w", nt.NoticeID, err)
	}
	if ack.Duplicate {
		// The same id was stored within the duplicate window but is no longer the last
		// notice of the entity: its window was announced again after another. The stream
		// takes the notice once that window has passed.
		n.log.Info("notice held back: the same notice was stored moments ago", "subject", subject, "notice", nt.NoticeID)
		return 0, false, nil
	}
	if h := n.hooks.afterPublish; h != nil {
		if err := h(nt); err != nil {
			return 0, false, err
		}
	}
	n.count.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", string(nt.Kind))))
	n.log.Info("notice published", "notice", nt.NoticeID, "kind", nt.Kind, "resource_id", nt.ResourceID, "lead_s", nt.Lead)
	return ack.Sequence, false, nil
}

// last reads what the last notice stored for an entity says (in its cell's stream, from the
// leader), and its stream sequence (0 when none).
func (n *Notifier) last(ctx context.Context, stream, subject string) (memo, uint64, error) {
	m, err := store.LeaderMsg(ctx, n.js, stream, subject)
	if errors.Is(err, store.ErrNoMessage) {
		return memo{}, 0, nil
	}
	if err != nil {
		return memo{}, 0, fmt.Errorf("read the last notice: %w", err)
	}
	nt, err := domain.DecodeNotice(m.Data)
	if err != nil {
		// Not ours to judge: publish after it, deciding as if nothing was sent.
		n.log.Warn("last notice does not decode", "subject", subject, "seq", m.Sequence, "err", err)
		return memo{}, m.Sequence, nil
	}
	return memoOf(nt, m.Header), m.Sequence, nil
}
