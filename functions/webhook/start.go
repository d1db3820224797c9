package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// A new subscription starts at the events stored after it was created, whatever the feed is
// doing: the feed copies its sources with a lag (a moment in steady state, much longer when it
// catches up after a restart or copies a history), so "new to the feed" is not "new". Where a
// subscription starts is therefore set by the sources' own sequences: its consumer records,
// in its metadata, the last sequence of each source stream when it was created, and the
// function acks without delivering a copy of anything at or before it.
//
// The consumer itself starts just after the feed's last message read before those sequences:
// every copy up to there is of a message stored before them, and every copy of a message stored
// after them comes later in the feed. Reading the feed, then the sources, leaves no gap.

// startMetaPrefix prefixes, in a subscription consumer's metadata, the name of a source stream
// of the feed; the value is that stream's last sequence when the subscription was created.
const startMetaPrefix = "maintsignals.after."

// start is where a subscription begins: for each source stream of the feed, the last sequence
// that is history to it. Empty (from the start, or a consumer made before starts were
// recorded), it skips nothing.
type start map[string]uint64

// subscriptionStart reads where a subscription created now starts: the feed's first sequence
// to read, and the sources' last sequences.
func subscriptionStart(ctx context.Context, js jetstream.JetStream, feed jetstream.Stream) (uint64, start, error) {
	info, err := feed.Info(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("webhook feed: %w", err)
	}
	st := start{}
	for _, src := range info.Config.Sources {
		s, err := js.Stream(ctx, src.Name)
		if err != nil {
			return 0, nil, fmt.Errorf("webhook feed source %s: %w", src.Name, err)
		}
		st[src.Name] = s.CachedInfo().State.LastSeq
	}
	return info.State.LastSeq + 1, st, nil
}

// metadata is the start as consumer metadata.
func (st start) metadata() map[string]string {
	md := make(map[string]string, len(st))
	for name, seq := range st {
		md[startMetaPrefix+name] = strconv.FormatUint(seq, 10)
	}
	return md
}

// startOf reads the start a consumer recorded.
func startOf(md map[string]string) start {
	st := start{}
	for k, v := range md {
		name, ok := strings.CutPrefix(k, startMetaPrefix)
		if seq, err := strconv.ParseUint(v, 10, 64); ok && err == nil {
			st[name] = seq
		}
	}
	return st
}

// history reports whether a message of the feed is a copy of one stored before the
// subscription began. Replays (not copies) never are.
func (st start) history(h nats.Header) bool {
	name, seq, ok := sourceOf(h)
	last, known := st[name]
	return ok && known && seq <= last
}

// sourceOf reads the stream and sequence a copy came from, in the header JetStream puts on a
// sourced message: "<stream> <sequence> <filter> <transform> <subject>".
func sourceOf(h nats.Header) (string, uint64, bool) {
	f := strings.Fields(h.Get(headerStreamSource))
	if len(f) < 2 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	return f[0], seq, err == nil
}

// startAt is where a self-service subscription created at time at (its create command's
// stored time) starts, whenever the webhook function first sees it: the feed's first message
// stored after at (a copy is stored after its original, so every copy before it is of a
// message stored at or before at), and each source's last sequence stored at or before at,
// which the function acks without delivering. The streams' states are read before the
// look-ups, so that a stream with nothing stored after at starts past all it held.
func startAt(ctx context.Context, js jetstream.JetStream, feed jetstream.Stream, at time.Time) (uint64, start, error) {
	info, err := feed.Info(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("webhook feed: %w", err)
	}
	last := map[string]uint64{domain.WebhookStream: info.State.LastSeq}
	for _, src := range info.Config.Sources {
		s, err := js.Stream(ctx, src.Name)
		if err != nil {
			return 0, nil, fmt.Errorf("webhook feed source %s: %w", src.Name, err)
		}
		last[src.Name] = s.CachedInfo().State.LastSeq
	}
	first := map[string]uint64{}
	for name, l := range last {
		seq, err := firstAfter(ctx, js, name, at)
		if err != nil {
			return 0, nil, err
		}
		first[name] = cmp.Or(seq, l+1)
	}
	st := start{}
	for _, src := range info.Config.Sources {
		st[src.Name] = first[src.Name] - 1
	}
	return first[domain.WebhookStream], st, nil
}

// firstAfter is the sequence of the first message stream stored after at, 0 when there is
// none yet (one request: the stream finds it by time).
func firstAfter(ctx context.Context, js jetstream.JetStream, stream string, at time.Time) (uint64, error) {
	after := at.Add(time.Nanosecond)
	req, err := json.Marshal(struct {
		StartTime *time.Time `json:"start_time"`
		NextFor   string     `json:"next_by_subj"`
		NoHeaders bool       `json:"no_hdr"`
	}{&after, ">", true})
	if err != nil {
		return 0, fmt.Errorf("first message of %s after %s: %w", stream, at, err)
	}
	resp, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("first message of %s after %s: %w", stream, at, err)
	}
	var r struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, fmt.Errorf("first message of %s after %s: %w", stream, at, err)
	}
	switch {
	case r.Error != nil && r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil
	case r.Error != nil:
		return 0, fmt.Errorf("first message of %s after %s: %w", stream, at, r.Error)
	case r.Message == nil:
		return 0, fmt.Errorf("first message of %s after %s: %w", stream, at, jetstream.ErrInvalidJetStreamResponse)
	}
	return r.Message.Seq, nil
}

// apiPrefix is the prefix of js's JetStream API requests, as jetstream.New and its variants
// make it.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}
