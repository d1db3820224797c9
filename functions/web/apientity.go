package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

// EventList is a page of an entity's outcome events, oldest first.
type EventList struct {
	Items         []domain.Event `json:"items"`
	NextPageToken string         `json:"nextPageToken,omitempty"`
}

// NoticeList is a page of an entity's notices, oldest first.
type NoticeList struct {
	Items         []domain.Notice `json:"items"`
	NextPageToken string          `json:"nextPageToken,omitempty"`
}

// apiEntity serves /api/v1/entities/{key}, …/history and …/notices.
func (v *View) apiEntity(w http.ResponseWriter, r *http.Request) {
	key, sub := splitEntityPath(r)
	id, err := domain.DecodeKey(key)
	if k, kerr := domain.Key(id); err != nil || kerr != nil || k != key || !viewer(r).Covers(key) {
		// Another tenant's entity is, to a customer, one never seen.
		v.problem(w, http.StatusNotFound, "", "no entity has the key "+key)
		return
	}
	switch sub {
	case "":
		v.apiRecord(w, r, key, id)
	case "history":
		v.apiStored(w, r, key, domain.EventStreamOf(key), domain.EventSubject(key), decodeEvents)
	case "notices":
		v.apiStored(w, r, key, domain.NoticeStreamOf(key), domain.NoticeSubject(key), decodeNotices)
	default:
		v.problem(w, http.StatusNotFound, "", "no resource at "+r.URL.Path)
	}
}

// apiRecord answers the record, with its revision as its ETag: If-None-Match with it is a 304.
func (v *View) apiRecord(w http.ResponseWriter, r *http.Request, key, id string) {
	e, err := v.cl.Get(r.Context(), id)
	if err != nil {
		v.log.Warn("api: read an entity", "key", key, "error", err)
		v.problem(w, http.StatusServiceUnavailable, "", "the entity could not be read: "+err.Error())
		return
	}
	if !e.Exists() {
		v.problem(w, http.StatusNotFound, "", "no entity "+id+" was ever seen (key "+key+")")
		return
	}
	tag := `"` + strconv.FormatUint(e.Revision, 10) + `"`
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("Cache-Control", "private, no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	v.json(w, http.StatusOK, fleet.View(key, e.Revision, e.Record, v.cfg.Now(), v.cfg.StuckAfter, v.fleet.inForce(key)))
}

// etagMatches reports whether the If-None-Match header names tag (weakly, RFC 9110 13.1.2).
func etagMatches(header, tag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

// storedPage is a page read from one subject of a stream, and whether more follow.
type storedPage struct {
	data [][]byte
	last uint64
	more bool
}

// apiStored answers a page of an entity's messages on subject of stream (its history or its
// notices), after the sequence its page token carries.
func (v *View) apiStored(w http.ResponseWriter, r *http.Request, key, stream, subject string, body func(storedPage) (any, error)) {
	n, err := pageSize(r)
	if err != nil {
		v.failParam(w, err)
		return
	}
	digest := filterDigest("stored", stream, subject)
	var cur cursor
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		if cur, err = v.seal.open(tok, digest); err != nil {
			v.failParam(w, &badParam{"pageToken", err})
			return
		}
	}
	p, err := v.readStored(r.Context(), stream, subject, cur.Seq, n)
	var out any
	if err == nil {
		out, err = body(p)
	}
	if err != nil {
		v.log.Warn("api: read an entity's stream", "key", key, "stream", stream, "error", err)
		v.problem(w, http.StatusServiceUnavailable, "", "could not be read: "+err.Error())
		return
	}
	if p.more {
		setNext(out, v.seal.seal(cursor{Seq: p.last, Filter: digest}))
	}
	v.json(w, http.StatusOK, out)
}

func setNext(list any, token string) {
	switch l := list.(type) {
	case *EventList:
		l.NextPageToken = token
	case *NoticeList:
		l.NextPageToken = token
	}
}

func decodeEvents(p storedPage) (any, error) {
	out := &EventList{Items: make([]domain.Event, 0, len(p.data))}
	for _, b := range p.data {
		ev, err := domain.DecodeEvent(b)
		if err != nil {
			return nil, fmt.Errorf("an event does not decode: %w", err)
		}
		out.Items = append(out.Items, ev)
	}
	return out, nil
}

func decodeNotices(p storedPage) (any, error) {
	out := &NoticeList{Items: make([]domain.Notice, 0, len(p.data))}
	for _, b := range p.data {
		n, err := domain.DecodeNotice(b)
		if err != nil {
			return nil, fmt.Errorf("a notice does not decode: %w", err)
		}
		out.Items = append(out.Items, n)
	}
	return out, nil
}

// readStored reads up to n messages of subject in stream after sequence after, with an
// ordered consumer; a stream that does not exist holds nothing.
func (v *View) readStored(ctx context.Context, stream, subject string, after uint64, n int) (storedPage, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	var p storedPage
	cons, err := v.js.OrderedConsumer(ctx, stream, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read %s: %w", stream, err)
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		return p, nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(min(n+1, 1024)))
	if err != nil {
		return p, fmt.Errorf("read %s: %w", stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return p, fmt.Errorf("read %s: %w", stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return p, fmt.Errorf("read %s: %w", stream, err)
		}
		p.data, p.last = append(p.data, msg.Data()), md.Sequence.Stream
		if md.NumPending == 0 || len(p.data) == n {
			p.more = md.NumPending > 0
			return p, nil
		}
	}
}
