package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"maintsignals/shared/domain"
)

// Live pages: a page asks its own URL for `text/event-stream` and is sent an event `change`
// when what it shows may have changed; its script then fetches the page again and swaps the
// part that changed. The events carry no data the page does not fetch itself, so they need no
// authorisation beyond the page's own.

type topicKind uint8

const (
	topicFleet     topicKind = iota + 1 // any record or policy
	topicEntity                         // one entity (key), or all ("")
	topicCampaigns                      // any campaign
	topicCampaign                       // one campaign (id)
)

// topic is what changed, or what a live page follows.
type topic struct {
	kind topicKind
	key  string
	// viewer, on a page that follows the fleet, is the customer it is shown to: it hears of
	// changes within its scopes only (of others' it must not learn even when they happen).
	viewer *Customer
}

// hub tells the live pages of a replica what changed.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// seq counts the changes published: a page carries the count it was rendered at, and
	// its stream starts with a change when there were more since (none is lost between
	// the page and its stream).
	seq atomic.Uint64
}

type subscriber struct {
	want topic
	ch   chan struct{} // capacity 1: a change not yet sent covers the next
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (s *subscriber) matches(t topic) bool {
	return t.kind == s.want.kind && (t.key == "" || s.want.key == "" || t.key == s.want.key)
}

func (s *subscriber) notify() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// subscribe follows want until cancel is called.
func (h *hub) subscribe(want topic) (*subscriber, func()) {
	s := &subscriber{want: want, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

// publish tells the pages that follow t. A change without a key (the fleet read again) is
// every page's.
func (h *hub) publish(t topic) {
	h.seq.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.matches(t) {
			s.notify()
		}
	}
}

// publishKeys publishes a topic of kind for each of keys (entity keys, campaign ids, or the
// scope keys of policies for the fleet). A page that follows no one key hears of them when its
// viewer sees one of them.
func (h *hub) publishKeys(kind topicKind, keys []string) {
	h.seq.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	var set map[string]bool
	for s := range h.subs {
		if s.want.kind != kind {
			continue
		}
		if set == nil {
			set = make(map[string]bool, len(keys))
			for _, k := range keys {
				set[k] = true
			}
		}
		if s.want.key == "" && s.sees(keys) || set[s.want.key] {
			s.notify()
		}
	}
}

// publishUnder tells the pages of kind that follow a key under one of the prefixes (the
// entities a policy's scope covers).
func (h *hub) publishUnder(kind topicKind, prefixes []string) {
	h.seq.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.want.kind != kind {
			continue
		}
		for _, p := range prefixes {
			if s.want.key == "" && s.want.viewer.overlaps(p) || s.want.key != "" && domain.KeyUnder(s.want.key, p) {
				s.notify()
				break
			}
		}
	}
}

// sees reports whether the subscriber's viewer sees one of keys (or what lies under it).
func (s *subscriber) sees(keys []string) bool {
	if s.want.viewer == nil {
		return true
	}
	for _, k := range keys {
		if s.want.viewer.overlaps(k) {
			return true
		}
	}
	return false
}

// keepAlive is how often an idle stream sends a comment, so that proxies keep it open.
const keepAlive = 20 * time.Second

// stream serves the events of a live page following want; extra, when set, runs beside it with
// a notify function of its own (an entity page also follows its outcome events and notices).
func (v *View) stream(w http.ResponseWriter, r *http.Request, want topic, extra func(ctx context.Context, notify func())) {
	if n := v.streams.Add(1); n > int64(v.cfg.MaxStreams) {
		v.streams.Add(-1)
		v.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("too many live pages on this replica (at most %d); reload the page by hand", v.cfg.MaxStreams))
		return
	}
	defer v.streams.Add(-1)
	rc := http.NewResponseController(w)
	sub, cancel := v.live.subscribe(want)
	defer cancel()
	if since, err := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64); err != nil || v.live.seq.Load() > since {
		sub.notify() // changed since the page was rendered (or it does not say when that was)
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	if extra != nil {
		go extra(ctx, sub.notify)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 2000\n\n")
	_ = rc.Flush()
	v.pump(ctx, w, rc, sub)
}

// sendKeepAlive writes a server-sent events comment that keeps an idle stream open; false
// when the client is gone.
func sendKeepAlive(w http.ResponseWriter, rc *http.ResponseController) bool {
	_, err := fmt.Fprint(w, ": keep-alive\n\n")
	return err == nil && rc.Flush() == nil
}

// pump sends a change event for every burst of changes: Coalesce after the first of them, and
// never two within Coalesce.
func (v *View) pump(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, sub *subscriber) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !sendKeepAlive(w, rc) {
				return
			}
			continue
		case <-sub.ch:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(v.cfg.Coalesce):
		}
		select { // what came meanwhile is covered by this event
		case <-sub.ch:
		default:
		}
		n++
		if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", n); err != nil || rc.Flush() != nil {
			return
		}
	}
}
