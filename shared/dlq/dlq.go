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

// List returns the dead letters, oldest first: every one the stream's leader holds when List
// is called. The reading consumer may sit on a replica that has not caught up yet (a letter
// stored a moment ago), so it waits up to catchUpWait for what the leader counted.
func List(ctx context.Context, js jetstream.JetStream) ([]Letter, error) {
	s, err := js.Stream(ctx, domain.DLQStream)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	last := s.CachedInfo().State.LastSeq
	if s.CachedInfo().State.Msgs == 0 {
		return nil, nil
	}
	cons, err := js.OrderedConsumer(ctx, domain.DLQStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	var out []Letter
	deadline := time.Now().Add(catchUpWait)
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("dead letters: %w", err)
			}
			n++
			out = append(out, letter(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data(), md.Timestamp))
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		switch {
		case len(out) > 0 && out[len(out)-1].Seq >= last:
			return out, nil // all the leader held
		case n == 0 && time.Now().After(deadline):
			return out, nil // the rest was deleted meanwhile, or the replica lags too far
		case n == 0:
			time.Sleep(50 * time.Millisecond)
		}
	}
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
	} else if cmd, rej := domain.DecodeCommand(body, "", ""); rej == nil || cmd.ID != "" {
		l.CommandID = cmd.ID
	}
	if l.CommandID == "" {
		l.CommandID = h.Get(domain.HeaderMsgID)
	}
	return l
}

// Replay sends dead letter seq through the command function (a policy command: the policies
// function; a webhook delivery: to its subscription's endpoint) again and removes it from the
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
	if raw.Header.Get(function.HeaderDLQStream) == domain.PoliciesStream {
		// A policy command goes back to the policies function.
		out.Subject = domain.PolicyCommandSubject(domain.KeyFromSubject(raw.Subject))
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
