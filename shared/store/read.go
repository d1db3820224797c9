package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Deleted reports whether msg, of a bucket's stream, is the marker of a deleted or purged key
// rather than a value.
func Deleted(msg jetstream.Msg) bool { return DeletedHeader(msg.Headers()) }

// DeletedHeader reports whether a message's headers mark a deleted or purged key, or a key
// whose last value the server removed (a marker: a tombstone past its time, ForgetAfter).
func DeletedHeader(h nats.Header) bool {
	return h.Get(domain.HeaderKVOperation) != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}

// ScanLast calls fn for the last message of every subject of stream that filter matches, in
// one pass over the stream as it is when the scan starts (an ordered consumer delivering the
// last message per subject); fn's error stops it.
func ScanLast(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func(jetstream.Msg, uint64) error) error {
	return Read(ctx, js, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	}, 0, fn)
}

// Read reads stream through an ordered consumer of cfg until nothing is pending (or, with
// until > 0, up to stream sequence until), then deletes the consumer: passes every tick
// would otherwise leave one behind each until it expires.
func Read(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, until uint64, fn func(jetstream.Msg, uint64) error) error {
	cfg.InactiveThreshold = cmp.Or(cfg.InactiveThreshold, time.Minute)
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	defer func() {
		if info := cons.CachedInfo(); info != nil {
			_ = js.DeleteConsumer(context.WithoutCancel(ctx), stream, info.Name)
		}
	}()
	return Drain(ctx, cons, until, fn)
}

// Drain reads cons until nothing is pending (or, with until > 0, up to stream sequence until),
// without waiting for messages still to come; fn's error stops it.
//
// An empty answer while the consumer still counts messages pending (an ordered consumer being
// recreated, a reply that came before the messages) is not the end: the next fetch waits for
// them, a second at most each time. So is a consumer that has no server answering yet: in a
// cluster a new consumer may take a moment to be served where it was placed.
func Drain(ctx context.Context, cons jetstream.Consumer, until uint64, fn func(jetstream.Msg, uint64) error) error {
	wait, unanswered := false, 0
	// notServed says whether err is a consumer not served yet, and waits a little if so.
	notServed := func(err error) bool {
		if !errors.Is(err, nats.ErrNoResponders) || unanswered >= maxUnanswered {
			return false
		}
		unanswered++
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
		return true
	}
	for ctx.Err() == nil {
		var batch jetstream.MessageBatch
		var err error
		if wait {
			batch, err = cons.Fetch(4096, jetstream.FetchMaxWait(time.Second))
		} else {
			batch, err = cons.FetchNoWait(4096)
		}
		if notServed(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		n, done, err := drainBatch(batch, until, fn)
		if done || err != nil {
			return err
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			if n == 0 && notServed(err) {
				continue
			}
			return fmt.Errorf("read: %w", err)
		}
		if n == 0 {
			info, err := cons.Info(ctx)
			if notServed(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			if info.NumPending == 0 {
				return nil
			}
			wait = true
			continue
		}
		wait = false
	}
	return ctx.Err()
}

// drainBatch hands the messages of one fetch to fn; done when the read is over (nothing
// pending, or until reached).
func drainBatch(batch jetstream.MessageBatch, until uint64, fn func(jetstream.Msg, uint64) error) (n int, done bool, err error) {
	for m := range batch.Messages() {
		n++
		md, err := m.Metadata()
		if err != nil {
			return n, true, fmt.Errorf("read: %w", err)
		}
		if until > 0 && md.Sequence.Stream > until {
			return n, true, nil
		}
		if err := fn(m, md.Sequence.Stream); err != nil {
			return n, true, err
		}
		if md.NumPending == 0 || until > 0 && md.Sequence.Stream == until {
			return n, true, nil
		}
	}
	return n, false, nil
}

// maxUnanswered bounds the fetches a read retries while its consumer is not served yet.
const maxUnanswered = 40

// ErrNoMessage is returned by LastMsg when the stream holds no message on the subject.
var ErrNoMessage = errors.New("no message on the subject")

// RawMsg is a message as a direct get returns it.
type RawMsg struct {
	Subject  string
	Sequence uint64
	Time     time.Time
	Header   nats.Header
	Data     []byte
}

// LastMsg returns the last message of stream on subject, by a direct get that names the
// subject in its request subject ($JS.API.DIRECT.GET.<stream>.<subject>): the form a
// permission can confine to a tenant's subjects, and one that needs no stream info first.
func LastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*RawMsg, error) {
	ctx, cancel := withAPITimeout(ctx, js)
	defer cancel()
	m, err := js.Conn().RequestWithContext(ctx, APIPrefix(js)+"DIRECT.GET."+stream+"."+subject, nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("direct get from %s: %w (run `maintctl provision`)", stream, jetstream.ErrStreamNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("direct get from %s: %w", stream, err)
	}
	switch st := m.Header.Get("Status"); st {
	case "":
	case "404":
		return nil, ErrNoMessage
	default:
		return nil, fmt.Errorf("direct get from %s: status %s %s", stream, st, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get from %s: sequence %q: %w", stream, m.Header.Get(jetstream.SequenceHeader), err)
	}
	at, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	return &RawMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Time: at, Header: m.Header, Data: m.Data}, nil
}

// APIPrefix is the JetStream API prefix js sends its requests to ("$JS.API." or a domain's).
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// LeaderMsg is LastMsg answered by the stream's leader ($JS.API.STREAM.MSG.GET): never
// behind the last write, as a direct get from a follower can be. It names the subject in its
// body only, so a user confined to a tenant may not send it.
func LeaderMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*RawMsg, error) {
	ctx, cancel := withAPITimeout(ctx, js)
	defer cancel()
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	m, err := js.Conn().RequestWithContext(ctx, APIPrefix(js)+"STREAM.MSG.GET."+stream, req)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("get from %s: %w", stream, nats.ErrNoResponders)
	}
	if err != nil {
		return nil, fmt.Errorf("get from %s: %w", stream, err)
	}
	var resp struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("get from %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == 10037: // no message found
		return nil, ErrNoMessage
	case resp.Error != nil && resp.Error.ErrCode == 10059: // stream not found
		return nil, fmt.Errorf("get from %s: %w (run `maintctl provision`)", stream, jetstream.ErrStreamNotFound)
	case resp.Error != nil:
		return nil, fmt.Errorf("get from %s: %d %s", stream, resp.Error.ErrCode, resp.Error.Desc)
	case resp.Message == nil:
		return nil, fmt.Errorf("get from %s: an answer without a message", stream)
	}
	raw := &RawMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Seq, Time: resp.Message.Time, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if raw.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("get from %s: headers: %w", stream, err)
		}
	}
	return raw, nil
}

// withAPITimeout bounds a request of ours to the JetStream API as the client's own are: by
// ctx's deadline, or else the client's default timeout.
func withAPITimeout(ctx context.Context, js jetstream.JetStream) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, cmp.Or(js.Options().DefaultTimeout, 5*time.Second))
}

// WrongLastSequence reports whether a publish was refused because the subject's last sequence
// was not the one expected: another write came first.
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
