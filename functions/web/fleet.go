package web

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maintsignals/shared/domain"
)

// FleetPage is the fleet page, and its JSON.
type FleetPage struct {
	At time.Time `json:"at"`
	// Scopes are the scopes of the customer token the page was asked with: the counts, the
	// time line and the table cover their entities alone (absent for the operator).
	Scopes []string `json:"scopes,omitempty"`
	Stats
	Timeline Timeline `json:"timeline"`
	Filter   Filter   `json:"filter"`
	Page
}

// Timeline is the windows of the coming days.
type Timeline struct {
	Days []Day `json:"days"`
	// Most is the largest count of a day (the scale of the bars).
	Most int `json:"-"`
}

// Filter is what the fleet table shows: a state and a resource-ID prefix (as given; it selects
// as domain.Prefix does).
type Filter struct {
	State  domain.State `json:"state,omitempty"`
	Prefix string       `json:"prefix,omitempty"`
	Limit  int          `json:"limit"`
}

func (v *View) fleetPage(w http.ResponseWriter, r *http.Request) {
	c := viewer(r)
	f := negotiate(r)
	if f == formatEvents {
		v.stream(w, r, topic{kind: topicFleet, viewer: c}, nil)
		return
	}
	q, filter, err := v.parseQuery(r)
	if err != nil {
		v.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !v.loaded.Load() {
		msg := "the fleet is being read; this page answers once it is"
		if c == nil { // the size of the fleet is the operator's to know
			msg = fmt.Sprintf("the fleet is being read (%d records so far); this page answers once it is", v.loading.Load())
		}
		v.fail(w, r, http.StatusServiceUnavailable, msg)
		return
	}
	q.Viewer = c
	now := v.cfg.Now()
	p := FleetPage{At: now.UTC(), Scopes: c.scopeIDs(), Stats: v.fleet.stats(now, c), Filter: filter, Page: v.fleet.page(q, now)}
	p.Timeline.Days = v.fleet.timeline(now, v.cfg.Days, c)
	for _, d := range p.Timeline.Days {
		p.Timeline.Most = max(p.Timeline.Most, d.Windows)
	}
	v.answer(w, r, "fleet", layout{Title: "Fleet", Nav: "fleet", Live: true, Body: p})
}

// parseQuery reads the fleet table's parameters: state (any casing of a state or its metric
// value), prefix (a resource-ID prefix), after or before (a key: the page after or before it)
// and limit.
func (v *View) parseQuery(r *http.Request) (Query, Filter, error) {
	in := r.URL.Query()
	q := Query{After: in.Get("after"), Before: in.Get("before"), Limit: v.cfg.PageSize}
	var f Filter
	if s := in.Get("state"); s != "" {
		st, ok := domain.ParseStateLoose(s)
		if !ok {
			return q, f, fmt.Errorf("state %q is none of None, Pending, Planned, Unplanned, CustomerActionNeeded", s)
		}
		q.State, f.State = st, st
	}
	if s := in.Get("prefix"); s != "" && s != "/" {
		p, err := domain.ParsePrefixLoose(s)
		if err != nil {
			return q, f, fmt.Errorf("prefix: %w", err)
		}
		q.Prefix, f.Prefix = p.Key, s
	}
	if s := in.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return q, f, fmt.Errorf("limit %q: a number from 1 to %d", s, MaxPageSize)
		}
		q.Limit = n
	}
	f.Limit = q.Limit
	return q, f, nil
}
