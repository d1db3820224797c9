package web

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/policy"
)

// EntityPage is one entity's page, and its JSON.
type EntityPage struct {
	Key    string       `json:"key"`
	Record fleet.Record `json:"record"`
	// History is the latest outcome events of its commands, oldest first (at most the
	// view's History of them, of HistoryTotal).
	History      []domain.Event  `json:"history"`
	HistoryTotal int             `json:"historyTotal"`
	Notices      []domain.Notice `json:"notices"`
	NoticesTotal int             `json:"noticesTotal"`
	// Policy is the policy in force (nil: none covers it).
	Policy *PolicyView `json:"policy"`
	At     time.Time   `json:"at"`
	// CampaignLink says whether the record's campaign links to its page (not for a customer,
	// to whom the campaigns' pages answer 404).
	CampaignLink bool `json:"-"`
}

// PolicyView is the policy in force for an entity.
type PolicyView struct {
	Scope    string          `json:"scope"`
	Level    string          `json:"level"`
	Document policy.Document `json:"document"`
	// WindowAllowed says whether the policy allows the entity's window (nil: it has none);
	// Why says why not.
	WindowAllowed *bool  `json:"windowAllowed,omitempty"`
	Why           string `json:"why,omitempty"`
	// Next is the policy's allowed windows of the coming days (at most 10).
	Next []domain.Window `json:"next"`
}

func (v *View) entityPage(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	id, err := domain.DecodeKey(key)
	if k, kerr := domain.Key(id); err != nil || kerr != nil || k != key {
		v.fail(w, r, http.StatusNotFound, "no entity has the key "+key)
		return
	}
	// Another tenant's entity is, to a customer, one never seen: the same answer, given before
	// anything is read, so that neither the answer nor its time tells whether it exists.
	c := viewer(r)
	if !c.Covers(key) {
		v.neverSeen(w, r, key, id)
		return
	}
	f := negotiate(r)
	if f == formatEvents {
		v.stream(w, r, topic{kind: topicEntity, key: key}, v.followEntity(id))
		return
	}
	p, found, err := v.entity(r.Context(), key, id)
	switch {
	case err != nil:
		v.log.Warn("entity page", "key", key, "error", err)
		v.fail(w, r, http.StatusServiceUnavailable, "the entity could not be read: "+err.Error())
		return
	case !found:
		v.neverSeen(w, r, key, id)
		return
	}
	p.CampaignLink = c == nil
	v.answer(w, r, "entity", layout{Title: shortName(p.Record.ResourceID), Nav: "fleet", Live: true, Body: p})
}

// neverSeen answers that no entity id was ever seen.
func (v *View) neverSeen(w http.ResponseWriter, r *http.Request, key, id string) {
	v.fail(w, r, http.StatusNotFound, "no entity "+id+" was ever seen (key "+key+")")
}

// entity reads an entity's record from the bucket (not the index: the page shows every field,
// as of now), its history and notices, and the policy in force.
func (v *View) entity(ctx context.Context, key, id string) (EntityPage, bool, error) {
	e, err := v.cl.Get(ctx, id)
	if err != nil || !e.Exists() {
		return EntityPage{}, false, err
	}
	rec := e.Record
	now := v.cfg.Now()
	in := v.fleet.inForce(key)
	p := EntityPage{Key: key, At: now.UTC(), Record: fleet.View(key, e.Revision, rec, now, v.cfg.StuckAfter, in)}
	var wg sync.WaitGroup
	var herr, nerr error
	wg.Go(func() { p.History, p.HistoryTotal, herr = v.history(ctx, id) })
	wg.Go(func() { p.Notices, p.NoticesTotal, nerr = v.notices(ctx, id) })
	p.Policy = policyView(in.Policy, rec.Window, now, v.cfg.Days)
	wg.Wait()
	return p, true, errors.Join(herr, nerr)
}

// history is the entity's latest outcome events, oldest first, and how many there are.
func (v *View) history(ctx context.Context, id string) ([]domain.Event, int, error) {
	last := newRing[domain.Event](v.cfg.History)
	err := v.cl.EachEvent(ctx, id, func(ev client.StoredEvent) error {
		last.add(ev.Event)
		return nil
	})
	return last.items(), last.total, err
}

// notices is the entity's latest notices, oldest first, and how many there are.
func (v *View) notices(ctx context.Context, id string) ([]domain.Notice, int, error) {
	key, err := domain.Key(id)
	if err != nil {
		return nil, 0, err
	}
	last := newRing[domain.Notice](v.cfg.History)
	err = v.cl.EachStored(ctx, domain.NoticeStreamOf(key), domain.NoticeSubject(key), func(b []byte, _ uint64) error {
		if n, err := domain.DecodeNotice(b); err == nil {
			last.add(n)
		}
		return nil
	})
	if errors.Is(err, client.ErrNotProvisioned) {
		err = nil // no notices stream: no notices
	}
	return last.items(), last.total, err
}

func policyView(p *policy.Policy, w *domain.Window, now time.Time, days int) *PolicyView {
	if p == nil {
		return nil
	}
	pv := &PolicyView{Scope: p.Scope().ID, Level: p.Scope().Level.String(), Document: p.Document(), Next: []domain.Window{}}
	if w != nil {
		ok := p.Allows(*w)
		pv.WindowAllowed = &ok
		if !ok {
			pv.Why = p.Why(*w)
		}
	}
	if p.HasWindows() {
		next := p.Occurrences(now, now.Add(time.Duration(days)*24*time.Hour))
		pv.Next = next[:min(len(next), 10)]
	}
	return pv
}

// followEntity follows an entity's outcome events and notices for its live page: a rejected
// command changes no record but adds to the history.
func (v *View) followEntity(id string) func(ctx context.Context, notify func()) {
	return func(ctx context.Context, notify func()) {
		evs, err := v.cl.Watch(ctx, client.WatchOptions{ResourceID: id})
		if err != nil {
			v.log.Debug("live entity page: cannot follow its events", "resource_id", id, "error", err)
			return
		}
		defer evs.Stop()
		if nts, err := v.cl.WatchNotices(ctx, client.WatchOptions{ResourceID: id}); err == nil {
			defer nts.Stop()
			go func() {
				for _, err := nts.Next(ctx); err == nil; _, err = nts.Next(ctx) {
					notify()
				}
			}()
		}
		for _, err := evs.Next(ctx); err == nil; _, err = evs.Next(ctx) {
			notify()
		}
	}
}

// ring keeps the last n items added.
type ring[T any] struct {
	buf   []T
	total int
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, 0, n)} }

func (r *ring[T]) add(v T) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, v)
	} else {
		r.buf[r.total%cap(r.buf)] = v
	}
	r.total++
}

// items are the kept items, oldest first.
func (r *ring[T]) items() []T {
	if r.total <= cap(r.buf) {
		return r.buf
	}
	i := r.total % cap(r.buf)
	return append(append(make([]T, 0, len(r.buf)), r.buf[i:]...), r.buf[:i]...)
}
