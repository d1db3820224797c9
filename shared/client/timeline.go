package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// TimelineItem is one entry of a Timeline: an outcome event or a lifecycle notice (exactly
// one is set), with the time the server stored it.
type TimelineItem struct {
	Event  *StoredEvent
	Notice *StoredNotice
	Stored time.Time
}

// TimelineOptions selects what a Timeline delivers.
type TimelineOptions struct {
	// ResourceID limits the timeline to one entity; "" follows every entity.
	ResourceID string
	// Since, when not zero, first replays what was stored since then.
	Since time.Time
	// NoFollow ends the timeline after the replay: Next then returns io.EOF.
	NoFollow bool
}

// Timeline is the outcome events and notices of the fleet (or of one entity) as one stream:
// the replay of what was stored since a time, events and notices merged in the order of their
// at (ties in the order the server stored them), then what is stored from then on, live. The
// replay is what the two streams held when the timeline was made; everything stored after comes
// live, once: each stream is read by one ordered consumer from the replay into the live part,
// so the seam has no gap and no repeat, and every replayed entry was stored before every live
// one. Live entries come as they arrive, each stream in its order.
//
// Neither stream is stored exactly in at order (a notice is dated by the record it judged,
// an event by the function that decided it), so the replay is read whole and sorted before
// its first entry is returned: it is held in memory.
//
// Next is for one goroutine at a time.
type Timeline struct {
	c         *Client
	cursors   []*cursor
	noFollow  bool
	following bool
	live      chan liveMsg
	stopped   context.Context
	stop      context.CancelFunc
	// replay is what is left of the replay, in at order, once read (replayed).
	replay   []TimelineItem
	replayed bool
}

// cursor reads one stream of the timeline.
type cursor struct {
	it     jetstream.MessagesContext
	decode func(data []byte, seq uint64) (TimelineItem, error)
	// left is how many messages of the replay are still to read: those its consumer had to
	// deliver when it was made (the rest come live).
	left uint64
	// more says a replayed message may still come; head is the next one, read ahead; held is
	// the first live one, read while looking for the end of the replay.
	more       bool
	head, held jetstream.Msg
}

type liveMsg struct {
	c   *cursor
	msg jetstream.Msg
	err error
}

// Timeline starts a timeline. Stop it when done.
func (c *Client) Timeline(ctx context.Context, o TimelineOptions) (*Timeline, error) {
	evs, err := c.eventSources(o.ResourceID)
	if err != nil {
		return nil, err
	}
	nts, _ := c.noticeSources(o.ResourceID)
	return c.timeline(ctx, o, decoding(evs, decodeEventItem), decoding(nts, decodeNoticeItem))
}

// timelineSource is a source of a timeline and how its messages read.
type timelineSource struct {
	source
	decode func([]byte, uint64) (TimelineItem, error)
}

func decoding(srcs []source, decode func([]byte, uint64) (TimelineItem, error)) []timelineSource {
	out := make([]timelineSource, len(srcs))
	for i, s := range srcs {
		out[i] = timelineSource{s, decode}
	}
	return out
}

// timeline starts a timeline of the sources, the earlier first when stored at the same time.
func (c *Client) timeline(ctx context.Context, o TimelineOptions, sources ...[]timelineSource) (*Timeline, error) {
	stopped, stop := context.WithCancel(context.Background())
	t := &Timeline{c: c, noFollow: o.NoFollow, live: make(chan liveMsg), stop: stop, stopped: stopped}
	for _, s := range slices.Concat(sources...) {
		cur, err := c.openCursor(ctx, s.stream, s.filter, o.Since)
		if err != nil {
			t.Stop()
			return nil, err
		}
		cur.decode = s.decode
		t.cursors = append(t.cursors, cur)
	}
	return t, nil
}

// openCursor opens the stream's ordered consumer: what it had to deliver when it was made is
// the replay, whatever is stored after comes live. (It asks nothing of the stream itself: a
// user confined to a tenant may not.)
func (c *Client) openCursor(ctx context.Context, stream, subject string, since time.Time) (*cursor, error) {
	it, pending, err := c.watchStream(ctx, stream, subject, since, "timeline")
	if err != nil {
		return nil, err
	}
	if since.IsZero() {
		pending = 0
	}
	return &cursor{it: it, left: pending, more: pending > 0}, nil
}

func decodeEventItem(data []byte, seq uint64) (TimelineItem, error) {
	ev, err := domain.DecodeEvent(data)
	return TimelineItem{Event: &StoredEvent{Event: ev, Seq: seq}}, err
}

func decodeNoticeItem(data []byte, seq uint64) (TimelineItem, error) {
	n, err := domain.DecodeNotice(data)
	return TimelineItem{Notice: &StoredNotice{Notice: n, Seq: seq}}, err
}

// Next returns the next entry: the replay's, in at order, then the live ones as they come;
// io.EOF after the replay with NoFollow. It waits until ctx ends (returning ctx's error); a
// permission violation of its reads ends it at once with a *natsconn.PermissionError. An
// entry that does not decode is skipped with a warning.
func (t *Timeline) Next(ctx context.Context) (TimelineItem, error) {
	var item TimelineItem
	err := t.c.Guard(ctx, jsAPI, func(ctx context.Context) error {
		if !t.replayed {
			if err := t.readReplay(ctx); err != nil {
				return err
			}
		}
		if len(t.replay) > 0 {
			item, t.replay = t.replay[0], t.replay[1:]
			return nil
		}
		for {
			msg, c, err := t.nextMsg(ctx)
			if err != nil {
				return err
			}
			it, ok, err := t.decode(msg, c)
			if err != nil || ok {
				item = it
				return err
			}
		}
	})
	return item, err
}

// readReplay reads the whole replay, merged by stored time, then sorts it by at: stable, so
// that equal times keep the order they were stored in.
func (t *Timeline) readReplay(ctx context.Context) error {
	for {
		if err := t.readHeads(ctx); err != nil {
			return err // what was read stays in t.replay: a retry goes on from there
		}
		c := earliest(t.cursors, func(c *cursor) *jetstream.Msg { return &c.head })
		if c == nil {
			break
		}
		it, ok, err := t.decode(take(&c.head), c)
		if err != nil {
			return err
		}
		if ok {
			t.replay = append(t.replay, it)
		}
	}
	slices.SortStableFunc(t.replay, func(a, b TimelineItem) int { return a.At().Compare(b.At()) })
	t.replayed = true
	return nil
}

// decode reads one message of cursor c; ok is false for one that does not decode (skipped
// with a warning).
func (t *Timeline) decode(msg jetstream.Msg, c *cursor) (it TimelineItem, ok bool, err error) {
	md, err := msg.Metadata()
	if err != nil {
		return TimelineItem{}, false, fmt.Errorf("timeline: %w", err)
	}
	it, err = c.decode(msg.Data(), md.Sequence.Stream)
	if err != nil {
		t.c.log.Warn("skipping an entry that does not decode", "subject", msg.Subject(), "seq", md.Sequence.Stream, "error", err)
		return TimelineItem{}, false, nil
	}
	it.Stored = md.Timestamp
	return it, true, nil
}

// At is the entry's at: the event's or the notice's.
func (it TimelineItem) At() time.Time {
	if it.Notice != nil {
		return it.Notice.At
	}
	if it.Event != nil {
		return it.Event.At
	}
	return time.Time{}
}

// nextMsg is the next message in timeline order.
func (t *Timeline) nextMsg(ctx context.Context) (jetstream.Msg, *cursor, error) {
	if err := t.readHeads(ctx); err != nil {
		return nil, nil, err
	}
	if c := earliest(t.cursors, func(c *cursor) *jetstream.Msg { return &c.head }); c != nil {
		return take(&c.head), c, nil
	}
	if t.noFollow {
		return nil, nil, io.EOF
	}
	// The replay is over: first the messages read past its end, in order, then the live ones.
	if c := earliest(t.cursors, func(c *cursor) *jetstream.Msg { return &c.held }); c != nil {
		return take(&c.held), c, nil
	}
	t.follow()
	return t.receive(ctx)
}

func take(m *jetstream.Msg) jetstream.Msg {
	msg := *m
	*m = nil
	return msg
}

// readHeads reads ahead the next replayed message of every cursor whose replay goes on. A
// message read with nothing pending behind it ends its stream's replay: the read came after
// the stream's last sequence was taken, so nothing of the replay remains.
func (t *Timeline) readHeads(ctx context.Context) error {
	for _, c := range t.cursors {
		if !c.more || c.head != nil {
			continue
		}
		msg, err := c.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return t.readErr(ctx, err)
		}
		if c.left == 0 {
			c.held, c.more = msg, false
			continue
		}
		c.left--
		c.head, c.more = msg, c.left > 0
	}
	return nil
}

// earliest is the cursor whose message (as pick points to it) was stored first; nil when
// none has one. Equal times go to the first cursor (events before notices).
func earliest(cursors []*cursor, pick func(*cursor) *jetstream.Msg) *cursor {
	var best *cursor
	var bestAt time.Time
	for _, c := range cursors {
		m := *pick(c)
		if m == nil {
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			return c // Next reports the error
		}
		if best == nil || md.Timestamp.Before(bestAt) {
			best, bestAt = c, md.Timestamp
		}
	}
	return best
}

// follow starts, once, one reader per stream, handing its messages over as they arrive.
func (t *Timeline) follow() {
	if t.following {
		return
	}
	t.following = true
	for _, c := range t.cursors {
		go func() {
			for {
				msg, err := c.it.Next(jetstream.NextContext(t.stopped))
				select {
				case t.live <- liveMsg{c: c, msg: msg, err: err}:
				case <-t.stopped.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (t *Timeline) receive(ctx context.Context) (jetstream.Msg, *cursor, error) {
	select {
	case m := <-t.live:
		if m.err != nil {
			return nil, nil, t.readErr(ctx, m.err)
		}
		return m.msg, m.c, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-t.stopped.Done():
		return nil, nil, ErrWatchStopped
	}
}

func (t *Timeline) readErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case t.stopped.Err() != nil, errors.Is(err, jetstream.ErrMsgIteratorClosed):
		return ErrWatchStopped
	}
	return fmt.Errorf("timeline: %w", err)
}

// Stop ends the timeline.
func (t *Timeline) Stop() {
	t.stop()
	for _, c := range t.cursors {
		c.it.Stop()
	}
}
