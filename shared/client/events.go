package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// EachEvent calls fn for every outcome event of resourceID ("" for every entity) kept in
// MAINT_EVENTS, oldest first, in one streaming pass; fn's error stops it. An event that does
// not decode is skipped with a warning.
func (c *Client) EachEvent(ctx context.Context, resourceID string, fn func(StoredEvent) error) error {
	subject, err := eventFilter(resourceID)
	if err != nil {
		return err
	}
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		return c.eachEvent(ctx, subject, fn)
	})
}

func (c *Client) eachEvent(ctx context.Context, subject string, fn func(StoredEvent) error) error {
	return c.eachStored(ctx, domain.EventsStream, subject, "history", func(data []byte, seq uint64) error {
		ev, err := domain.DecodeEvent(data)
		if err != nil {
			c.log.Warn("skipping an outcome event that does not decode", "seq", seq, "error", err)
			return nil
		}
		return fn(StoredEvent{Event: ev, Seq: seq})
	})
}

// eachStored calls fn with every message of stream under subject, oldest first, in one
// ordered pass that ends at the last message stored when it starts; what names the errors.
func (c *Client) eachStored(ctx context.Context, stream, subject, what string, fn func(data []byte, seq uint64) error) error {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("%s: %w", what, notProvisioned(err))
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var n uint64
	for _, v := range info.State.Subjects {
		n += v
	}
	if n == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer it.Stop()
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

func eventFilter(resourceID string) (string, error) {
	if resourceID == "" {
		return domain.EventPrefix + "*", nil
	}
	key, err := domain.Key(resourceID)
	if err != nil {
		return "", err
	}
	return domain.EventSubject(key), nil
}

// Watcher delivers outcome events live, from the moment it was created (or from Since).
type Watcher struct {
	it  jetstream.MessagesContext
	log *slog.Logger
	c   *Client
}

// WatchOptions selects what a Watcher delivers.
type WatchOptions struct {
	// ResourceID limits the events to one entity; "" watches every entity.
	ResourceID string
	// Since, when not zero, starts with the events stored since then.
	Since time.Time
}

// Watch starts watching outcome events. Events published after Watch returns are delivered;
// it survives reconnects without losing or repeating events (an ordered consumer).
func (c *Client) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	subject, err := eventFilter(o.ResourceID)
	if err != nil {
		return nil, err
	}
	it, _, err := c.watchStream(ctx, domain.EventsStream, subject, o.Since, "watch")
	if err != nil {
		return nil, err
	}
	return &Watcher{it: it, log: c.log, c: c}, nil
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
// *natsconn.PermissionError.
func (w *Watcher) Next(ctx context.Context) (StoredEvent, error) {
	var ev StoredEvent
	err := w.c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		var err error
		ev, err = w.next(ctx)
		return err
	})
	return ev, err
}

func (w *Watcher) next(ctx context.Context) (StoredEvent, error) {
	for {
		msg, err := w.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return StoredEvent{}, ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return StoredEvent{}, ErrWatchStopped
			}
			return StoredEvent{}, fmt.Errorf("watch: %w", err)
		}
		ev, derr := domain.DecodeEvent(msg.Data())
		if derr != nil {
			w.log.Warn("skipping an outcome event that does not decode", "subject", msg.Subject(), "error", derr)
			continue
		}
		var seq uint64
		if md, err := msg.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		return StoredEvent{Event: ev, Seq: seq}, nil
	}
}

// Stop ends the watch.
func (w *Watcher) Stop() { w.it.Stop() }

// EachStored calls fn with every message of stream under subject (a subject or a wildcard),
// oldest first, in one ordered pass that ends at the last message stored when it starts:
// for readers of what this package does not decode itself (a campaign's events).
func (c *Client) EachStored(ctx context.Context, stream, subject string, fn func(data []byte, seq uint64) error) error {
	return c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		return c.eachStored(ctx, stream, subject, "read "+stream, fn)
	})
}
