package function

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The retry, dead-letter and panic policy: the one place where a handler's result becomes an
// ack, a retry with backoff or a dead letter.

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

// DeadLetterHook runs after a message has been copied to the dead-letter stream, before it is
// terminated (for example to publish a dead_lettered outcome). Its error retries the message.
type DeadLetterHook func(ctx context.Context, msg Message, reason string) error

// ErrPermanent marks an error that no retry can fix (a poison message).
var ErrPermanent = errors.New("permanent failure")

// Permanent wraps err so that the runtime dead-letters the message without retrying.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// Dead-letter headers, on the copy in the dead-letter stream.
const (
	HeaderDLQReason     = "Maint-Dlq-Reason"
	HeaderDLQStream     = "Maint-Dlq-Stream"
	HeaderDLQSeq        = "Maint-Dlq-Seq"
	HeaderDLQSubject    = "Maint-Dlq-Subject"
	HeaderDLQDeliveries = "Maint-Dlq-Deliveries"
	HeaderDLQAt         = "Maint-Dlq-At"
)

// DefaultBackoff rides out a JetStream leader election (seconds) before giving up.
var DefaultBackoff = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// attempt runs the handler on msg, unless msg is past the delivery budget: then the handler
// already had its last try and the process handling it died (or the dead letter failed), and a
// message that kills processes gets no other go.
func (r *runner) attempt(ctx context.Context, msg Message) error {
	if msg.Delivered > uint64(r.cfg.MaxDeliver) {
		return Permanent(fmt.Errorf("delivered %d times, past the budget of %d, without a settled result", msg.Delivered, r.cfg.MaxDeliver))
	}
	return r.call(ctx, msg)
}

// call runs the handler, turning a panic into a permanent failure: a poison message must not
// crash the process or come back forever.
func (r *runner) call(ctx context.Context, msg Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("handler panic: %v", p))
		}
	}()
	return r.cfg.Handler(ctx, msg)
}

// Results of a settled message, as recorded in metrics.
const (
	resultAck        = "ack"
	resultRetry      = "retry"
	resultDeadLetter = "dead_letter"
)

// settle is the one place where a handler's result becomes ack, retry or dead letter. In place
// (keyed consumers), a failed dead letter is left to the caller to try again rather than
// handed back to the server, so that the message keeps its place in its key's order.
func (r *runner) settle(ctx context.Context, raw jetstream.Msg, msg Message, err error, inPlace bool) string {
	if err == nil {
		if aerr := raw.Ack(); aerr != nil {
			r.log.Warn("ack failed; the message will be redelivered and handled idempotently", "subject", msg.Subject, "seq", msg.Seq, "err", aerr)
		}
		return resultAck
	}
	log := r.log.With("subject", msg.Subject, "seq", msg.Seq, "delivery", msg.Delivered)
	if !errors.Is(err, ErrPermanent) && msg.Delivered < uint64(r.cfg.MaxDeliver) {
		delay := r.backoff(msg.Delivered)
		log.Warn("handler failed; retrying", "err", err, "retry_in", delay)
		if nerr := raw.NakWithDelay(delay); nerr != nil {
			log.Warn("nak failed; the message will be redelivered after the ack wait", "err", nerr)
		}
		return resultRetry
	}
	reason := err.Error()
	if !errors.Is(err, ErrPermanent) {
		reason = fmt.Sprintf("gave up after %d deliveries: %s", msg.Delivered, reason)
	}
	if derr := r.deadLetter(ctx, msg, reason); derr != nil {
		// Losing the message is not an option: try again later.
		log.Error("dead-letter failed; retrying", "err", derr, "reason", reason)
		if !inPlace {
			_ = raw.NakWithDelay(r.backoff(msg.Delivered))
		}
		return resultRetry
	}
	log.Error("message dead-lettered", "reason", reason)
	if terr := raw.TermWithReason(truncate(reason, 200)); terr != nil {
		log.Warn("term failed", "err", terr)
	}
	return resultDeadLetter
}

func (r *runner) backoff(delivered uint64) time.Duration {
	i := int(delivered) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(r.cfg.Backoff) {
		i = len(r.cfg.Backoff) - 1
	}
	return r.cfg.Backoff[i]
}

func (r *runner) deadLetter(ctx context.Context, msg Message, reason string) error {
	if r.cfg.DeadLetterSubject != nil {
		out := nats.NewMsg(r.cfg.DeadLetterSubject(msg))
		out.Data = msg.Data
		for k, v := range msg.Header {
			out.Header[k] = append([]string(nil), v...)
		}
		out.Header.Set(HeaderDLQReason, truncate(reason, 4096))
		out.Header.Set(HeaderDLQStream, msg.Stream)
		out.Header.Set(HeaderDLQSeq, strconv.FormatUint(msg.Seq, 10))
		out.Header.Set(HeaderDLQSubject, msg.Subject)
		out.Header.Set(HeaderDLQDeliveries, strconv.FormatUint(msg.Delivered, 10))
		out.Header.Set(HeaderDLQAt, time.Now().UTC().Format(time.RFC3339Nano))
		// One copy per original message, however often this runs.
		out.Header.Set(nats.MsgIdHdr, fmt.Sprintf("dlq-%s-%d", msg.Stream, msg.Seq))
		if r.cfg.DecorateDeadLetter != nil {
			r.cfg.DecorateDeadLetter(msg, out)
		}
		if _, err := r.js.PublishMsg(ctx, out); err != nil {
			return fmt.Errorf("copy to dead-letter stream: %w", err)
		}
	}
	if r.cfg.OnDeadLetter != nil {
		if err := r.cfg.OnDeadLetter(ctx, msg, reason); err != nil {
			return fmt.Errorf("dead-letter hook: %w", err)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
