package subscription

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// Stored is the last revision of a located name in the bucket: a subscription, or the delete
// that ended one.
type Stored struct {
	Key     string // the located name
	Rev     uint64 // the bucket revision (its stream sequence)
	At      time.Time
	Deleted bool
	Meta    domain.SubscriptionMeta
	Record  Record // the zero Record when Deleted
}

// ErrCorrupt is wrapped when a revision's header or value does not read.
var ErrCorrupt = errors.New("subscription revision does not read")

// FromMsg reads a revision of the bucket from its message.
func FromMsg(subject string, seq uint64, at time.Time, h nats.Header, data []byte) (Stored, error) {
	s := Stored{Key: strings.TrimPrefix(subject, domain.SubscriptionSubject("")), Rev: seq, At: at}
	switch h.Get(domain.HeaderKVOperation) {
	case domain.KVDelete, domain.KVPurge:
		s.Deleted = true
	}
	var err error
	if s.Meta, err = domain.DecodeSubscriptionMeta(h.Get(domain.HeaderSubscriptionMeta)); err != nil {
		return s, fmt.Errorf("subscription %s revision %d: %w: %w", s.Key, seq, ErrCorrupt, err)
	}
	if !s.Deleted {
		if s.Record, err = DecodeRecord(data); err != nil {
			return s, fmt.Errorf("subscription %s revision %d: %w: %w", s.Key, seq, ErrCorrupt, err)
		}
	}
	return s, nil
}

// Last reads the last revision of located name key from the bucket's stream (at its leader);
// nil when it never had one.
func Last(ctx context.Context, bucket jetstream.Stream, key string) (*Stored, error) {
	m, err := bucket.GetLastMsgForSubject(ctx, domain.SubscriptionSubject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read subscription %s: %w", key, err)
	}
	s, err := FromMsg(m.Subject, m.Sequence, m.Time, m.Header, m.Data)
	return &s, err
}

// Scan calls fn with every subscription in force under the located-name filter tokens ("" or
// ">": every one; a scope's tokens, "<sub>.>" or "<sub>.<group>.>", its tenant's), read by an
// ordered consumer of the bucket's stream, the last revision of each. It asks for no stream
// information, which a customer may not have: the filter in the request is what NATS
// permissions check. A revision that does not read is passed with its error.
func Scan(ctx context.Context, js jetstream.JetStream, tokens string, fn func(Stored, error) error) error {
	if tokens == "" {
		tokens = ">"
	}
	cons, err := js.OrderedConsumer(ctx, domain.SubscriptionsBucketStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.SubscriptionSubject(tokens)},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	return store.Drain(ctx, cons, 0, func(m jetstream.Msg, seq uint64) error {
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("list subscriptions: %w", err)
		}
		s, err := FromMsg(m.Subject(), seq, md.Timestamp, m.Headers(), m.Data())
		if s.Deleted && err == nil {
			return nil
		}
		return fn(s, err)
	})
}
