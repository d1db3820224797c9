package web

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"maintsignals/shared/domain"
)

// GET /api/v1/events: the outcome events of the entities and their notices, as server-sent
// events. They come from sixteen streams (MAINT_EVENTS_C<cell> and MAINT_NOTICES_C<cell>), so
// an event's id is where every one of them stands once the event is sent, not one stream's
// sequence: "e3:123.<position>" (the event is sequence 123 of cell 3's events stream; n for
// the notices) where <position> is, base64url, the time the feed began (Unix ms) and the last
// sequence sent of each stream (0: none yet), as varints. Last-Event-ID resumes each stream
// after its own sequence, and those yet without one from the time the feed began: nothing is
// missed or repeated. The order across streams is the order the events reach the view; within
// a stream, the stream's.

// feedStreams is how many streams a position counts: the events' cells, then the notices'.
func feedStreams() int { return 2 * len(domain.AllCells()) }

// position is where a feed stands in each of its streams.
type position struct {
	since time.Time
	seqs  []uint64
}

func (p position) encode() string {
	b := binary.AppendVarint(nil, p.since.UnixMilli())
	for _, s := range p.seqs {
		b = binary.AppendUvarint(b, s)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// parsePosition reads the position of an event id.
func parsePosition(id string) (position, error) {
	_, enc, ok := strings.Cut(id, ".")
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		return position{}, errors.New("not an id of this feed")
	}
	ms, n := binary.Varint(b)
	if n <= 0 {
		return position{}, errors.New("not an id of this feed")
	}
	p := position{since: time.UnixMilli(ms).UTC(), seqs: make([]uint64, feedStreams())}
	b = b[n:]
	for i := range p.seqs {
		if p.seqs[i], n = binary.Uvarint(b); n <= 0 {
			return position{}, errors.New("not an id of this feed")
		}
		b = b[n:]
	}
	if len(b) != 0 {
		return position{}, errors.New("not an id of this feed")
	}
	return p, nil
}

// feedStart is where the feed begins: Last-Event-ID, else since (RFC 3339), else now.
func (v *View) feedStart(r *http.Request) (position, error) {
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		p, err := parsePosition(id)
		if err != nil {
			return p, &badParam{"Last-Event-ID", err}
		}
		return p, nil
	}
	p := position{since: v.cfg.Now().UTC().Truncate(time.Millisecond), seqs: make([]uint64, feedStreams())}
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return p, &badParam{"since", fmt.Errorf("%q: an RFC 3339 time", s)}
		}
		p.since = t.UTC().Truncate(time.Millisecond)
	}
	return p, nil
}

// feedMsg is a message of one of the feed's streams.
type feedMsg struct {
	stream int
	seq    uint64
	data   []byte
}

// feedSource is stream i of the feed: its name, its subjects' prefix and its kind.
func feedSource(i int) (stream, prefix, kind string) {
	cells := domain.AllCells()
	if i < len(cells) {
		return cells[i].EventsStream(), domain.EventPrefix, "outcome"
	}
	return cells[i-len(cells)].NoticesStream(), domain.NoticePrefix, "notice"
}

// label is the short name of stream i in an event id: e<cell> or n<cell>.
func label(i int) string {
	if n := len(domain.AllCells()); i >= n {
		return fmt.Sprintf("n%d", i-n)
	}
	return fmt.Sprintf("e%d", i)
}
