// Package dlq reads the dead-letter stream and sends dead letters through again.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
	"maintsignals/shared/subscription"
)

// HeaderReplayOf marks a replayed command with the dead-letter sequence it came from.
const HeaderReplayOf = "Maint-Replay-Of"

// Letter is one dead-lettered command.
type Letter struct {
	Seq        uint64    `json:"seq"` // sequence in MAINT_DLQ
	Key        string    `json:"key"`
	CommandID  string    `json:"commandId"`
	Reason     string    `json:"reason"`
	Deliveries int       `json:"deliveries"`
	At         time.Time `json:"at"`
	Body       []byte    `json:"body"`
	// Subscription is set on a webhook delivery that was dead-lettered (README, Integrating): the body is
	// the event or notice, CommandID its CloudEvents id, and a replay sends it to that
	// subscription's endpoint again instead of through the command function.
	Subscription string `json:"subscription,omitempty"`
	// Header is the dead letter's headers (a webhook delivery's CloudEvents attributes).
	Header nats.Header `json:"-"`
}

// ErrNotFound is returned when a dead letter does not exist.
var ErrNotFound = errors.New("dead letter not found")

// Filter selects dead letters; the zero filter selects every one.
type Filter struct {
	// Since, when set, keeps the dead letters stored from then on.
	Since time.Time
	// Subscription keeps the webhook deliveries dead-lettered for that subscription.
	Subscription string
	// Limit keeps the newest Limit of those (0: all).
	Limit int
}

// List returns the dead letters, oldest first, as ListWhere does.
func List(ctx context.Context, js jetstream.JetStream) ([]Letter, error) {
	letters, _, err := ListWhere(ctx, js, Filter{})
	return letters, err
}

// ListWhere returns the dead letters f selects, oldest first, and how many older ones its
// limit left out: of every one the stream's leader holds when it is called. The reading
// consumer may sit on a replica that has not caught up yet (a letter stored a moment ago), so
// it waits up to catchUpWait for what the leader counted. A cluster that has no responder for a
// moment (a leader being elected, a consumer placed on a replica still starting) is asked again
// for up to that long too.
func ListWhere(ctx context.Context, js jetstream.JetStream, f Filter) (letters []Letter, omitted int, err error) {
	deadline := time.Now().Add(catchUpWait)
	for {
		letters, omitted, err = listOnce(ctx, js, f)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) || ctx.Err() != nil {
			return letters, omitted, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func listOnce(ctx context.Context, js jetstream.JetStream, f Filter) (letters []Letter, omitted int, err error) {
	s, err := js.Stream(ctx, domain.DLQStream)
	if err != nil {
		return nil, 0, fmt.Errorf("dead letters: %w", err)
	}
	last := s.CachedInfo().State.LastSeq
	if s.CachedInfo().State.Msgs == 0 {
		return nil, 0, nil
	}
	cfg := jetstream.OrderedConsumerConfig{}
	if !f.Since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &f.Since
	}
	cons, err := js.OrderedConsumer(ctx, domain.DLQStream, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("dead letters: %w", err)
	}
	if info := cons.CachedInfo(); !f.Since.IsZero() && info != nil && info.NumPending == 0 {
		return nil, 0, nil // nothing stored since then
	}
	var seen uint64
	deadline := time.Now().Add(catchUpWait)
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, 0, fmt.Errorf("dead letters: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, fmt.Errorf("dead letters: %w", err)
			}
			n, seen = n+1, md.Sequence.Stream
			if l := letter(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data(), md.Timestamp); f.Subscription == "" || l.Subscription == f.Subscription {
				letters = append(letters, l)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, 0, fmt.Errorf("dead letters: %w", err)
		}
		// All the leader held; or nothing more in time: the rest was deleted meanwhile, or the
		// replica lags too far.
		if seen >= last || n == 0 && time.Now().After(deadline) {
			return newest(letters, f.Limit)
		}
		if n == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// newest keeps the last limit letters (all with 0) and says how many it left out.
func newest(letters []Letter, limit int) ([]Letter, int, error) {
	if limit <= 0 || len(letters) <= limit {
		return letters, 0, nil
	}
	omitted := len(letters) - limit
	return letters[omitted:], omitted, nil
}

// catchUpWait bounds how long a read waits for a replica that lags its stream's leader.
const catchUpWait = 2 * time.Second

func letter(seq uint64, subject string, h nats.Header, body []byte, stored time.Time) Letter {
	l := Letter{Seq: seq, Key: domain.KeyFromSubject(subject), Reason: h.Get(function.HeaderDLQReason), Body: body, At: stored,
		Subscription: h.Get(domain.HeaderWebhookSubscription), Header: h}
	l.Deliveries, _ = strconv.Atoi(h.Get(function.HeaderDLQDeliveries))
	if l.Subscription != "" {
		l.CommandID = h.Get(domain.HeaderCEID)
		return l
	}
	if h.Get(function.HeaderDLQStream) == domain.PoliciesStream {
		cmd, _ := policy.DecodeCommand(body, "", "")
		l.CommandID = cmd.ID
	} else if h.Get(function.HeaderDLQStream) == domain.SubscriptionsStream {
		cmd, _ := subscription.DecodeCommand(body, "", "")
		l.CommandID = cmd.ID
		l.Body = subscription.Redact(body) // a list never shows a secret; a replay reads the stream
	} else if cmd, rej := domain.DecodeCommand(body, "", ""); rej == nil || cmd.ID != "" {
		l.CommandID = cmd.ID
	}
	if l.CommandID == "" {
		l.CommandID = h.Get(domain.HeaderMsgID)
	}
	return l
}

// Replay sends dead letter seq through the command function (a policy command: the policies
// function; a subscription command: the subscriptions function; a webhook delivery: to its
// subscription's endpoint) again and removes it from the
// dead-letter stream. The command keeps its id, so a command that was in fact applied comes
// back as a duplicate, never as a second change. The copy is published without Nats-Msg-Id
// so that the commands stream's de-duplication window does not swallow it.
func Replay(ctx context.Context, js jetstream.JetStream, seq uint64) (*jetstream.PubAck, error) {
	s, err := js.Stream(ctx, domain.DLQStream)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("replay %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("replay %d: %w", seq, err)
	}
	out := nats.NewMsg(domain.CommandSubject(domain.KeyFromSubject(raw.Subject)))
	switch raw.Header.Get(function.HeaderDLQStream) {
	case domain.PoliciesStream:
		// A policy command goes back to the policies function.
		out.Subject = domain.PolicyCommandSubject(domain.KeyFromSubject(raw.Subject))
	case domain.SubscriptionsStream:
		// A subscription command goes back to the subscriptions function, on its own subject.
		out.Subject = domain.SubscriptionCommandSubject(domain.SubscriptionKeyOf(raw.Header.Get(function.HeaderDLQSubject)))
	}
	out.Data = raw.Data
	out.Header.Set(HeaderReplayOf, strconv.FormatUint(seq, 10))
	if sub := raw.Header.Get(domain.HeaderWebhookSubscription); sub != "" {
		// A webhook delivery goes back to its subscription's endpoint, with the same
		// CloudEvents attributes (so the same webhook-id): the webhook function reads it from
		// the subscription's replay subject.
		out.Subject = domain.WebhookReplaySubject(sub, domain.KeyFromSubject(raw.Subject))
		for k, v := range raw.Header {
			if strings.HasPrefix(k, "ce-") || k == domain.HeaderContentType {
				out.Header[k] = v
			}
		}
	}
	// A signed command stays signed: the signature covers the body, which is unchanged.
	for _, h := range []string{signing.HeaderSigner, signing.HeaderSignature} {
		if v := raw.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	ack, err := js.PublishMsg(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("replay %d: %w", seq, err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return ack, fmt.Errorf("replay %d: sent, but not removed from %s: %w", seq, domain.DLQStream, err)
	}
	return ack, nil
}
