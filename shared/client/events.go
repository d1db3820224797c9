package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// StoredEvent is an outcome event with where it sits in MAINT_EVENTS.
type StoredEvent struct {
	domain.Event
	// Seq is the event's sequence in MAINT_EVENTS.
	Seq uint64 `json:"-"`
}

// History returns every outcome event of resourceID kept in MAINT_EVENTS, oldest first.
func (c *Client) History(ctx context.Context, resourceID string) ([]domain.Event, error) {
	var out []domain.Event
	err := c.EachEvent(ctx, resourceID, func(ev StoredEvent) error {
		out = append(out, ev.Event)
		return nil
	})
	return out, err
}

// StreamFilter bounds a read of a long stream (the outcome events, the notices): one entity or
// every one, from a time on, the newest entries only.
type StreamFilter struct {
	// ResourceID limits the read to one entity; "" reads every entity.
	ResourceID string
	// Since, when set, starts at the entries stored then; the zero time reads all the stream
	// keeps.
	Since time.Time
	// Limit keeps the newest Limit entries of those read (0: all of them).
	Limit int
}

// Page is what a bounded read kept, oldest first, and how many older entries its limit left
// out.
type Page[T any] struct {
	Items   []T
	Omitted int
}

// newest keeps the last limit items added (every one when limit is 0), in a ring, so that a
// read of millions keeps only what it returns.
type newest[T any] struct {
	limit, next, seen int
	ring              []T
}

func (n *newest[T]) add(v T) {
	n.seen++
	if n.limit <= 0 || len(n.ring) < n.limit {
		n.ring = append(n.ring, v)
		return
	}
	n.ring[n.next] = v
	n.next = (n.next + 1) % n.limit
}

func (n *newest[T]) page() Page[T] {
	items := append(append([]T(nil), n.ring[n.next:]...), n.ring[:n.next]...)
	return Page[T]{Items: items, Omitted: n.seen - len(items)}
}

// Events reads the outcome events that f selects, oldest first, in one streaming pass.
func (c *Client) Events(ctx context.Context, f StreamFilter) (Page[StoredEvent], error) {
	srcs, err := c.eventSources(f.ResourceID)
	if err != nil {
		return Page[StoredEvent]{}, err
	}
	keep := newest[StoredEvent]{limit: f.Limit}
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		keep = newest[StoredEvent]{limit: f.Limit}
		return c.eachEvent(ctx, srcs, f.Since, func(ev StoredEvent) error { keep.add(ev); return nil })
	})
	return keep.page(), err
}

// EachEvent calls fn for every outcome event of resourceID ("" for every entity) kept in the
// cells' events streams, oldest first, in one streaming pass; fn's error stops it. An event
// that does not decode is skipped with a warning.
func (c *Client) EachEvent(ctx context.Context, resourceID string, fn func(StoredEvent) error) error {
	srcs, err := c.eventSources(resourceID)
	if err != nil {
		return err
	}
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		return c.eachEvent(ctx, srcs, time.Time{}, fn)
	})
}

func (c *Client) eachEvent(ctx context.Context, srcs []source, since time.Time, fn func(StoredEvent) error) error {
	return c.eachStoredIn(ctx, srcs, since, "history", func(data []byte, seq uint64) error {
		ev, err := domain.DecodeEvent(data)
		if err != nil {
			c.log.Warn("skipping an outcome event that does not decode", "seq", seq, "error", err)
			return nil
		}
		return fn(StoredEvent{Event: ev, Seq: seq})
	})
}

// eachStored calls fn with every message of stream under subject (stored since then, when
// since is set), oldest first, in one ordered pass that ends at the last message stored when
// it starts; what names the errors. It asks nothing of the stream but its consumer: a user
// confined to a tenant may not look at a stream's subjects.
func (c *Client) eachStored(ctx context.Context, stream, subject string, since time.Time, what string, fn func(data []byte, seq uint64) error) error {
	it, n, err := c.readStream(ctx, stream, subject, since, what)
	if err != nil || it == nil {
		return err
	}
	defer it.Stop()
	return readUpTo(ctx, it, n, what, fn)
}

// readUpTo reads n messages of it (fewer when some are gone meanwhile), handing each to fn.
func readUpTo(ctx context.Context, it jetstream.MessagesContext, n uint64, what string, fn func(data []byte, seq uint64) error) error {
	var read, lastPending uint64
	for {
		next := jetstream.NextContext(ctx)
		if read > 0 && read < n && lastPending == 0 {
			// The stream's leader counted n when the read started, but the replica serving
			// this read says it has no more yet: it lags (a cluster after a restart). Wait a
			// little for the rest rather than give an answer that misses the last writes.
			next = jetstream.NextMaxWait(catchUpWait)
		}
		msg, err := it.Next(next)
		if err != nil {
			if read > 0 && errors.Is(err, nats.ErrTimeout) {
				return nil // gone since the count (retention): what there is
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fn(msg.Data(), md.Sequence.Stream); err != nil {
			return err
		}
		read++
		lastPending = md.NumPending
		if read >= n {
			return nil
		}
	}
}

// catchUpWait is how long a read of a stream waits for a lagging replica to catch up with the
// count its leader gave.
const catchUpWait = 2 * time.Second

// Watcher delivers outcome events live, from the moment it was created (or from Since): a
// Timeline of the events alone.
type Watcher struct{ t *Timeline }

// WatchOptions selects what a Watcher delivers.
type WatchOptions struct {
	// ResourceID limits the events to one entity; "" watches every entity.
	ResourceID string
	// Since, when not zero, starts with the events stored since then.
	Since time.Time
}

// Watch starts watching outcome events. Events published after Watch returns are delivered;
// it survives reconnects without losing or repeating events (an ordered consumer per cell).
func (c *Client) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	srcs, err := c.eventSources(o.ResourceID)
	if err != nil {
		return nil, err
	}
	t, err := c.timeline(ctx, TimelineOptions{ResourceID: o.ResourceID, Since: o.Since}, decoding(srcs, decodeEventItem))
	if err != nil {
		return nil, err
	}
	return &Watcher{t: t}, nil
}

// watchStream reads stream live under subject with an ordered consumer (it survives reconnects
// without losing or repeating messages): from now, or from since when it is not zero. pending
// is how many messages it had to deliver when it was made.
func (c *Client) watchStream(ctx context.Context, stream, subject string, since time.Time, what string) (it jetstream.MessagesContext, pending uint64, err error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	var cons jetstream.Consumer
	err = c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		var err error
		cons, err = c.JS.OrderedConsumer(ctx, stream, cfg)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, notProvisioned(err))
	}
	if it, err = cons.Messages(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	if info := cons.CachedInfo(); info != nil {
		pending = info.NumPending
	}
	return it, pending, nil
}

// ErrWatchStopped is returned by Next after Stop.
var ErrWatchStopped = errors.New("watch stopped")

// Next waits for the next event until ctx ends (returning ctx's error). A permission
// violation of the watch (its pulls, its replies) ends it at once with a
// *natsconn.PermissionError. An event that does not decode is skipped with a warning.
func (w *Watcher) Next(ctx context.Context) (StoredEvent, error) {
	it, err := w.t.Next(ctx)
	if err != nil {
		return StoredEvent{}, err
	}
	return *it.Event, nil
}

// Stop ends the watch.
func (w *Watcher) Stop() { w.t.Stop() }

// EachStored calls fn with every message of stream under subject (a subject or a wildcard),
// oldest first, in one ordered pass that ends at the last message stored when it starts:
// for readers of what this package does not decode itself (a campaign's events).
func (c *Client) EachStored(ctx context.Context, stream, subject string, fn func(data []byte, seq uint64) error) error {
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		return c.eachStored(ctx, stream, subject, time.Time{}, "read "+stream, fn)
	})
}
