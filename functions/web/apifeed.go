package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

func (v *View) apiEvents(w http.ResponseWriter, r *http.Request) {
	pos, err := v.feedStart(r)
	if err != nil {
		v.failParam(w, err)
		return
	}
	if n := v.streams.Add(1); n > int64(v.cfg.MaxStreams) {
		v.streams.Add(-1)
		v.problem(w, http.StatusServiceUnavailable, "", fmt.Sprintf("too many event streams on this replica (at most %d)", v.cfg.MaxStreams))
		return
	}
	defer v.streams.Add(-1)
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	msgs := make(chan feedMsg)
	c := viewer(r)
	for i := range pos.seqs {
		go v.followFeed(ctx, i, pos, c, msgs)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_, _ = fmt.Fprint(w, "retry: 2000\n\n")
	_ = rc.Flush()
	v.sendFeed(ctx, w, rc, pos, msgs)
}

// sendFeed writes each message as an event whose id is the position after it.
func (v *View) sendFeed(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, pos position, msgs <-chan feedMsg) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !sendKeepAlive(w, rc) {
				return
			}
		case m := <-msgs:
			pos.seqs[m.stream] = m.seq
			_, _, kind := feedSource(m.stream)
			id := label(m.stream) + ":" + strconv.FormatUint(m.seq, 10) + "." + pos.encode()
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, kind, m.data); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// followFeed sends stream i's messages after pos that c sees (nil: all) until ctx ends. A
// stream that does not exist (notices not provisioned) sends nothing.
func (v *View) followFeed(ctx context.Context, i int, pos position, c *Customer, out chan<- feedMsg) {
	stream, prefix, _ := feedSource(i)
	cell := domain.AllCells()[i%len(domain.AllCells())]
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{cell.ScopeFilter(prefix, domain.Prefix{})}}
	if c != nil {
		cfg.FilterSubjects = cfg.FilterSubjects[:0]
		for _, s := range c.Scopes {
			cfg.FilterSubjects = append(cfg.FilterSubjects, cell.ScopeFilter(prefix, s.Prefix))
		}
	}
	if seq := pos.seqs[i]; seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	} else {
		since := pos.since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	it, err := v.feedMessages(ctx, stream, cfg)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) && ctx.Err() == nil {
			v.log.Warn("api events: cannot follow a stream", "stream", stream, "error", err)
		}
		return
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return
		}
		md, err := msg.Metadata()
		if err != nil || !c.Covers(domain.KeyFromSubject(msg.Subject())) {
			continue
		}
		select {
		case out <- feedMsg{stream: i, seq: md.Sequence.Stream, data: oneShape(msg.Data(), i)}:
		case <-ctx.Done():
			return
		}
	}
}

func (v *View) feedMessages(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.MessagesContext, error) {
	cons, err := v.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	return cons.Messages()
}

// oneShape is a stored event or notice written in its one JSON shape (as the history and the
// notices answer it); what does not decode goes as it was stored.
func oneShape(data []byte, i int) []byte {
	var b []byte
	var err error
	if i < len(domain.AllCells()) {
		var ev domain.Event
		if ev, err = domain.DecodeEvent(data); err == nil {
			b, err = json.Marshal(ev)
		}
	} else {
		var n domain.Notice
		if n, err = domain.DecodeNotice(data); err == nil {
			b, err = json.Marshal(n)
		}
	}
	if err != nil {
		return bytes.ReplaceAll(data, []byte("\n"), []byte(" ")) // one data line
	}
	return b
}
