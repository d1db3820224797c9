// Package notices is the function that publishes lifecycle notices (README, Time in the signal): reminders
// before an announced window, due when it starts, overdue when it ends with the entity still
// Pending, and stuck when an update runs too long. It runs on the emitter's tick, from a
// durable consumer of its own, with any number of replicas.
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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	cfg    Config
	js     jetstream.JetStream
	store  *store.Store
	stream jetstream.Stream
	log    *slog.Logger
	count  metric.Int64Counter

	// known is, per entity key, the last notice this replica knows to be stored: a notice
	// that is stored stays stored, so when known already covers an entity's current stage the
	// run needs no read. It only saves reads; the stream decides.
	mu    sync.Mutex
	known map[string]sent

	hooks hooks
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
	s, err := js.Stream(ctx, domain.NoticesStream)
	if err != nil {
		return nil, fmt.Errorf("notices: stream %s (provision first): %w", domain.NoticesStream, err)
	}
	count, err := cfg.Meters.Meter(scopeName).Int64Counter(metricNotices, metric.WithUnit("{notice}"),
		metric.WithDescription("Lifecycle notices published, by kind."))
	if err != nil {
		return nil, fmt.Errorf("notices metrics: %w", err)
	}
	return &Notifier{
		cfg: cfg, js: js, store: st, stream: s, count: count,
		log:   cfg.Logger.With("function", "notices"),
		known: map[string]sent{},
	}, nil
}

// RuntimeConfig is how the function runtime serves the notices function: the durable notices
// consumer of the schedule stream, one tick at a time, every tick acknowledged (the next tick
// is the retry of a run that failed, deciding again from what is stored).
func (n *Notifier) RuntimeConfig() function.Config {
	return function.Config{
		Name:         "notices",
		Stream:       domain.ScheduleStream,
		Consumers:    []string{domain.NoticesConsumer},
		Handler:      n.Handle,
		MaxDeliver:   2,
		Concurrency:  1,
		DrainTimeout: n.cfg.runTimeout() + 5*time.Second,
		Logger:       n.cfg.Logger,
		Meters:       n.cfg.Meters,
	}
}

// Run serves ticks until ctx is cancelled (maintctl function notices, maintctl up).
func Run(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	n, err := New(ctx, js, cfg)
	if err != nil {
		return err
	}
	return function.Run(ctx, js, n.RuntimeConfig())
}

// Handle serves one tick. It always acknowledges it (returns nil).
func (n *Notifier) Handle(ctx context.Context, msg function.Message) error {
	log := n.log.With("tick_seq", msg.Seq)
	if msg.Pending > 0 {
		log.Debug("tick skipped: a newer tick is waiting", "pending", msg.Pending)
		return nil
	}
	res, err := n.runOnce(ctx)
	if err != nil {
		log.Warn("notices run incomplete; the next tick carries on", "err", err, "published", res.Published)
		return nil
	}
	log.Debug("notices run", "entities", res.Entities, "due", res.Due, "read", res.Read, "published", res.Published)
	return nil
}

// result describes one run.
type result struct {
	// Entities read from the bucket; Due, the entities whose current stage this replica did
	// not know to be sent; Read, the last-notice reads; Published, the notices stored.
	Entities, Due, Read, Published int
}

// runOnce reads the bucket and publishes every notice that is due now.
func (n *Notifier) runOnce(ctx context.Context) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.runTimeout())
	defer cancel()
	now := n.cfg.Now()
	keep := map[string]sent{}
	due, res, err := n.scan(ctx, now, keep)
	if err != nil {
		n.replace(keep)
		return res, fmt.Errorf("notices: read the bucket: %w", err)
	}
	err = n.publishDue(ctx, due, now, keep, &res)
	n.replace(keep)
	return res, err
}

// scan reads the bucket and returns the entities that have a notice due which did not go out
// yet; an entity whose notice the replica knows went out is kept in keep.
func (n *Notifier) scan(ctx context.Context, now time.Time, keep map[string]sent) ([]entry, result, error) {
	var (
		res   result
		due   []entry
		known = n.snapshot()
	)
	err := n.store.Scan(ctx, func(e store.Entry, derr error) error {
		if derr != nil {
			return nil // the emitter reports records that do not decode
		}
		res.Entities++
		id := e.Record.ResourceID
		if id == "" {
			id, _ = domain.DecodeKey(e.Key)
			e.Record.ResourceID = id
		}
		nt, ok := stage(e.Key, e.Record, now, n.cfg.Remind, n.cfg.StuckAfter)
		if !ok {
			return nil
		}
		if s, ok := known[e.Key]; ok && covers(s, nt) {
			keep[e.Key] = s
			return nil
		}
		due = append(due, entry{key: e.Key, rec: e.Record})
		return nil
	})
	res.Due = len(due)
	return due, res, err
}

// publishDue delivers the notices of due, workers entities at once, until ctx ends; what went
// out is kept in keep and counted in res.
func (n *Notifier) publishDue(ctx context.Context, due []entry, now time.Time, keep map[string]sent, res *result) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		work = make(chan entry)
	)
	for range min(workers, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				s, reads, published, err := n.deliver(ctx, e.key, e.rec, now)
				mu.Lock()
				res.Read += reads
				if published {
					res.Published++
				}
				if s != nil {
					keep[e.key] = *s
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", e.key, err))
				}
				mu.Unlock()
			}
		}()
	}
	for _, e := range due {
		select {
		case work <- e:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

type entry struct {
	key string
	rec domain.Record
}

func (n *Notifier) snapshot() map[string]sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.known
}

// replace keeps what the run knows of the entities that have a stage now; the others have
// nothing due and need no memory.
func (n *Notifier) replace(m map[string]sent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.known = m
}

// maxConflicts bounds the re-reads after losing a race on one entity in one run; each lost
// race means another replica stored a notice of the entity, so a few settle it.
const maxConflicts = 5

// deliver publishes the entity's due notice unless the stream already has it, and returns
// what is stored last for the entity as far as it knows (nil if it cannot tell).
func (n *Notifier) deliver(ctx context.Context, key string, rec domain.Record, now time.Time) (last *sent, reads int, published bool, err error) {
	subject := domain.NoticeSubject(key)
	for range maxConflicts {
		var seq uint64
		last, seq, err = n.last(ctx, subject)
		reads++
		if err != nil {
			return nil, reads, false, err
		}
		nt, ok := decide(key, rec, now, n.cfg.Remind, n.cfg.StuckAfter, last)
		if !ok {
			return last, reads, false, nil // already stored
		}
		if h := n.hooks.beforePublish; h != nil {
			if err := h(nt); err != nil {
				return nil, reads, false, err
			}
		}
		body, err := domain.EncodeNotice(nt)
		if err != nil {
			return nil, reads, false, err
		}
		msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
		msg.Header.Set(domain.HeaderMsgID, nt.NoticeID)
		domain.SetCloudEventHeaders(msg.Header, domain.NoticeCEType(string(nt.Kind)), nt.NoticeID, nt.ResourceID, nt.At)
		ack, err := n.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(seq))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			n.log.Debug("another replica stored a notice of the entity first; reading again", "key", key, "notice", nt.NoticeID)
			continue
		}
		if err != nil {
			return nil, reads, false, fmt.Errorf("publish %s: %w", nt.NoticeID, err)
		}
		if ack.Duplicate {
			// The same id was stored within the duplicate window but is no longer the last
			// notice of the entity: its window was announced again after another. The stream
			// takes the notice once that window has passed.
			n.log.Info("notice held back: the same notice was stored moments ago", "key", key, "notice", nt.NoticeID)
			return nil, reads, false, nil
		}
		if h := n.hooks.afterPublish; h != nil {
			if err := h(nt); err != nil {
				return nil, reads, true, err
			}
		}
		n.count.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", string(nt.Kind))))
		n.log.Info("notice published", "notice", nt.NoticeID, "kind", nt.Kind, "resource_id", nt.ResourceID, "lead_s", nt.Lead)
		s, _ := sentOf(nt.NoticeID)
		return &s, reads, true, nil
	}
	return nil, reads, false, fmt.Errorf("gave up after %d conflicting publishes", maxConflicts)
}

// last reads the last notice stored for an entity and its stream sequence (0 when none).
func (n *Notifier) last(ctx context.Context, subject string) (*sent, uint64, error) {
	m, err := n.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the last notice: %w", err)
	}
	nt, err := domain.DecodeNotice(m.Data)
	if err != nil {
		// Not ours to judge: publish after it, deciding as if nothing was sent.
		n.log.Warn("last notice does not decode", "subject", subject, "seq", m.Sequence, "err", err)
		return nil, m.Sequence, nil
	}
	s, ok := sentOf(nt.NoticeID)
	if !ok {
		return nil, m.Sequence, nil
	}
	return &s, m.Sequence, nil
}
