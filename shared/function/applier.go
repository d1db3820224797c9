package function

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// The functions that apply signed commands to a bucket's keys exactly once (policies,
// subscriptions) share their settings, their outcome events' publishing and the compare-and-
// swap of their writes; what is theirs alone is the command, the record and the decision.

// Publisher publishes to JetStream: outcome events, a bucket's writes.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// ApplierConfig configures a replica of a function that applies signed commands, A checking
// their signatures. Zero fields take the defaults.
type ApplierConfig[A any] struct {
	// Auth checks signatures (nil: unsigned commands are accepted).
	Auth A
	// MaxCommandAge is how long after issuedAt a signed command is accepted, by its stored
	// time (the command function's default).
	MaxCommandAge time.Duration
	// MaxDeliver is the delivery budget before a command is dead-lettered.
	MaxDeliver int
	Log        *slog.Logger
	Meters     metric.MeterProvider
	// Events replaces the outcome publisher (fault injection in tests).
	Events Publisher
}

// WithDefaults checks c, errors wrapping invalid, and fills its zero fields, maxAge the
// command age.
func (c ApplierConfig[A]) WithDefaults(invalid error, maxAge time.Duration) (ApplierConfig[A], error) {
	if err := cmp.Or(
		NotNegative(invalid, "MaxCommandAge", c.MaxCommandAge),
		NotNegative(invalid, "MaxDeliver", c.MaxDeliver),
	); err != nil {
		return c, err
	}
	c.MaxCommandAge = cmp.Or(c.MaxCommandAge, maxAge)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, DefaultMaxDeliver)
	c.Log = cmp.Or(c.Log, slog.Default())
	c.Meters = cmp.Or[metric.MeterProvider](c.Meters, noop.NewMeterProvider())
	return c, nil
}

// OutcomeEvent is an outcome event of a command applied to a key.
type OutcomeEvent interface {
	// Answers is the command the event answers: its id and sequence.
	Answers() (id string, seq uint64)
	// CloudEvent is the event's CloudEvents type and source, and its time.
	CloudEvent() (ceType, source string, at time.Time)
}

// Outcomes are the outcome events of a function that applies commands, one subject a key:
// published under the id JetStream de-duplicates on, and read back for a redelivery.
type Outcomes[E OutcomeEvent] struct {
	what      string           // "policy", "subscription": names them in errors
	stream    jetstream.Stream // where they are stored
	publisher Publisher
	subject   func(key string) string
	encode    func(E) ([]byte, error)
	decode    func([]byte) (E, error)
}

// NewOutcomes are the outcome events of what (the commands' kind, for errors), stored in
// stream on subject(key).
func NewOutcomes[E OutcomeEvent](what string, stream jetstream.Stream, p Publisher, subject func(key string) string, encode func(E) ([]byte, error), decode func([]byte) (E, error)) Outcomes[E] {
	return Outcomes[E]{what: what, stream: stream, publisher: p, subject: subject, encode: encode, decode: decode}
}

// Publish publishes ev, the outcome of a command on key, under msgID. An event that does not
// encode never will: it is permanent.
func (o Outcomes[E]) Publish(ctx context.Context, key, msgID string, ev E) error {
	b, err := o.encode(ev)
	if err != nil {
		return Permanent(err)
	}
	ceType, source, at := ev.CloudEvent()
	if _, err := o.publisher.PublishMsg(ctx, EventMsg(o.subject(key), msgID, ceType, source, at, b)); err != nil {
		return fmt.Errorf("publish %s outcome: %w", o.what, err)
	}
	return nil
}

// Answered reports whether a redelivered command (msg, of id) already has its outcome: a
// key's events are published in command order, so if the last one answers this command only
// the ack was lost.
func (o Outcomes[E]) Answered(ctx context.Context, key, id string, msg Message) (bool, error) {
	if msg.Delivered <= 1 {
		return false, nil
	}
	m, err := o.stream.GetLastMsgForSubject(ctx, o.subject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read last %s outcome: %w", o.what, err)
	}
	last, err := o.decode(m.Data)
	if err != nil {
		return false, nil
	}
	lastID, lastSeq := last.Answers()
	return lastSeq == msg.Seq && lastID == id, nil
}

// PublishAt publishes m expecting its subject's last sequence to be rev (0: none): a
// compare-and-swap on a bucket's key. It returns the new sequence; moved reports a lost swap
// (the subject moved past rev), with the server's error.
func PublishAt(ctx context.Context, js Publisher, m *nats.Msg, rev uint64) (seq uint64, moved bool, err error) {
	ack, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	if store.WrongLastSequence(err) {
		return 0, true, err
	}
	if err != nil {
		return 0, false, err
	}
	return ack.Sequence, false, nil
}

// Verifier checks the signature of a command over its exact body.
type Verifier interface {
	Verify(body []byte, h nats.Header) (*signing.Signer, *domain.Rejection)
}

// Gate reads and checks a signed command C: its signature over the exact body first (auth
// nil: none is checked), then its content (decode), then whether the signer may send it
// (authorize). signedBy puts the signer in the command: a nil one clears the self-declared
// actor of a command refused for its signature or authority, a verified one's configured
// name replaces it.
func Gate[C any](msg Message, auth Verifier, decode func([]byte) (C, *domain.Rejection), authorize func(*signing.Signer, C) *domain.Rejection, signedBy func(*C, *signing.Signer)) (C, *domain.Rejection) {
	var signer *signing.Signer
	if auth != nil && len(msg.Data) <= domain.MaxCommandBytes {
		var rej *domain.Rejection
		if signer, rej = auth.Verify(msg.Data, msg.Header); rej != nil {
			cmd, _ := decode(msg.Data) // best effort, for the event
			signedBy(&cmd, nil)
			return cmd, rej
		}
	}
	cmd, rej := decode(msg.Data)
	if rej != nil {
		return cmd, rej
	}
	if auth != nil {
		if rej := authorize(signer, cmd); rej != nil {
			signedBy(&cmd, nil)
			return cmd, rej
		}
	}
	if signer != nil {
		signedBy(&cmd, signer)
	}
	return cmd, nil
}
