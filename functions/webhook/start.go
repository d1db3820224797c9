package webhook

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
