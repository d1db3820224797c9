package emitter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"maintsignals/shared/domain"
)

// Stream metrics: how near each stream of the product is to nats-server's high-cardinality
// threshold (domain.HighCardinalityThreshold), past which a crash costs a rebuild that reads
// every block. Every emitter replica reports them; readers take the maximum per stream.
const (
	MetricStreamSubjects  = "cluster.maintenance.stream.subjects"
	MetricStreamDeleted   = "cluster.maintenance.stream.interior_deletes"
	MetricStreamMessages  = "cluster.maintenance.stream.messages"
	AttrStream            = "messaging.destination.name"
	streamStatsFreshFor   = 10 * time.Second
	streamStatsReadWithin = 2 * time.Second
)

// streamInfo reads a stream's state.
type streamInfo interface {
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// streamStats reports the size of the product's streams at each collection, read at most every
// streamStatsFreshFor (a scrape or an export reads the cache in between).
type streamStats struct {
	js  streamInfo
	log *slog.Logger
	reg metric.Registration

	mu     sync.Mutex
	readAt time.Time
	last   map[string]jetstream.StreamState
}

func newStreamStats(m metric.Meter, js streamInfo, log *slog.Logger) (*streamStats, error) {
	s := &streamStats{js: js, log: log}
	subjects, err := m.Int64ObservableGauge(MetricStreamSubjects, metric.WithUnit("{subject}"),
		metric.WithDescription("Subjects held by a stream of the product; nats-server stops writing a stream's index periodically past 1,000,000."))
	if err != nil {
		return nil, fmt.Errorf("stream metrics: %w", err)
	}
	deleted, err := m.Int64ObservableGauge(MetricStreamDeleted, metric.WithUnit("{message}"),
		metric.WithDescription("Interior deletes of a stream of the product (messages removed between its first and last); nats-server stops writing a stream's index periodically past 1,000,000."))
	if err != nil {
		return nil, fmt.Errorf("stream metrics: %w", err)
	}
	msgs, err := m.Int64ObservableGauge(MetricStreamMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Messages held by a stream of the product."))
	if err != nil {
		return nil, fmt.Errorf("stream metrics: %w", err)
	}
	s.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for name, st := range s.states(ctx) {
			attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrStream, name)))
			o.ObserveInt64(subjects, int64(st.NumSubjects), attrs)
			o.ObserveInt64(deleted, int64(st.NumDeleted), attrs)
			o.ObserveInt64(msgs, int64(st.Msgs), attrs)
		}
		return nil
	}, subjects, deleted, msgs)
	if err != nil {
		return nil, fmt.Errorf("stream metrics: %w", err)
	}
	return s, nil
}

// states is the last state of every stream of the product that exists, read again when the
// last read is older than streamStatsFreshFor. A stream that cannot be read now keeps its last
// state out: a gauge never reports what it did not read.
func (s *streamStats) states(ctx context.Context) map[string]jetstream.StreamState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && time.Since(s.readAt) < streamStatsFreshFor {
		return s.last
	}
	ctx, cancel := context.WithTimeout(ctx, streamStatsReadWithin)
	defer cancel()
	out := make(map[string]jetstream.StreamState, len(domain.Streams()))
	for _, name := range domain.Streams() {
		st, err := s.js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			continue // not provisioned (campaigns, webhooks)
		case err != nil:
			s.log.Debug("stream metrics: stream not read", "stream", name, "err", err)
			continue
		}
		out[name] = st.CachedInfo().State
	}
	s.last, s.readAt = out, time.Now()
	return out
}

func (s *streamStats) close() error {
	if s == nil || s.reg == nil {
		return nil
	}
	return s.reg.Unregister()
}
