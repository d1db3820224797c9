package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
)

// The read API, /api/v1 (infra/api/openapi.json describes it): the entities, one at a time
// or in pages, their history and notices, the policies, the campaigns and a feed of outcome
// events and notices. It answers from the code the pages answer from (the fleet index, the
// client's reads), with the records in their one shape (fleet.Record), and takes the view's
// authentication: the operator's token or client certificates, and the customers' tokens,
// which confine a holder to its scopes.

// API page sizes (AIP-158).
const (
	DefaultAPIPageSize = 100
	MaxAPIPageSize     = 1000
)

// EntityList is a page of entities.
type EntityList struct {
	Items []fleet.Record `json:"items"`
	// NextPageToken asks for the next page ("" or absent on the last).
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// apiRoutes adds the API's routes to mux.
func (v *View) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/entities", v.apiEntities)
	mux.HandleFunc("GET /api/v1/entities/{rest...}", v.apiEntity)
	mux.HandleFunc("GET /api/v1/policies", v.apiPolicies)
	mux.HandleFunc("GET /api/v1/campaigns", v.operatorOnly(v.apiCampaigns))
	mux.HandleFunc("GET /api/v1/campaigns/{id}", v.operatorOnly(v.apiCampaign))
	mux.HandleFunc("GET /api/v1/events", v.apiEvents)
	mux.HandleFunc("GET /api/v1/openapi.json", v.apiDocument)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			v.problem(w, http.StatusMethodNotAllowed, "", "the API is read-only")
			return
		}
		v.problem(w, http.StatusNotFound, "", "no resource at "+r.URL.Path)
	})
}

// badParam is a parameter that does not read.
type badParam struct {
	name string
	err  error
}

func (e *badParam) Error() string { return e.name + ": " + e.err.Error() }
func (e *badParam) Unwrap() error { return e.err }

// failParam answers 400 for err, naming the parameter at fault when it is a *badParam.
func (v *View) failParam(w http.ResponseWriter, err error) {
	var bp *badParam
	target := ""
	if errors.As(err, &bp) {
		target = bp.name
	}
	v.problem(w, http.StatusBadRequest, target, err.Error())
}

// pageSize reads pageSize: 1 to MaxAPIPageSize, DefaultAPIPageSize when absent or 0.
func pageSize(r *http.Request) (int, error) {
	s := r.URL.Query().Get("pageSize")
	if s == "" {
		return DefaultAPIPageSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > MaxAPIPageSize {
		return 0, &badParam{"pageSize", fmt.Errorf("%q: a number from 1 to %d", s, MaxAPIPageSize)}
	}
	if n == 0 {
		n = DefaultAPIPageSize
	}
	return n, nil
}

// entitiesQuery reads the filters of GET /api/v1/entities and the digest that binds a page
// token to them (and to the holder of the token asked with).
func (v *View) entitiesQuery(r *http.Request) (Query, []byte, error) {
	in := r.URL.Query()
	q := Query{Viewer: viewer(r)}
	var err error
	if q.Limit, err = pageSize(r); err != nil {
		return q, nil, err
	}
	if s := in.Get("state"); s != "" {
		st, ok := domain.ParseStateLoose(s)
		if !ok {
			return q, nil, &badParam{"state", fmt.Errorf("%q is none of %v", s, domain.States)}
		}
		q.State = st
	}
	if s := in.Get("prefix"); s != "" && s != "/" {
		p, err := domain.ParsePrefixLoose(s)
		if err != nil {
			return q, nil, &badParam{"prefix", err}
		}
		q.Prefix = p.Key
	}
	if s := in.Get("updating"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, nil, &badParam{"updating", fmt.Errorf("%q: true or false", s)}
		}
		q.Updating = &b
	}
	if q.StartBefore, err = timeParam(r, "windowStartBefore"); err != nil {
		return q, nil, err
	}
	if q.StartAfter, err = timeParam(r, "windowStartAfter"); err != nil {
		return q, nil, err
	}
	return q, filterDigest("entities", string(q.State), q.Prefix, in.Get("updating"),
		strconv.FormatInt(q.StartBefore, 10), strconv.FormatInt(q.StartAfter, 10), q.Viewer.name()), nil
}

// timeParam reads an RFC 3339 time as Unix nanoseconds (0 when absent).
func timeParam(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixNano() == 0 {
		return 0, &badParam{name, fmt.Errorf("%q: an RFC 3339 time", s)}
	}
	return t.UnixNano(), nil
}

func (v *View) apiEntities(w http.ResponseWriter, r *http.Request) {
	q, digest, err := v.entitiesQuery(r)
	if err != nil {
		v.failParam(w, err)
		return
	}
	var cur cursor
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		if cur, err = v.seal.open(tok, digest); err != nil {
			v.failParam(w, &badParam{"pageToken", err})
			return
		}
	}
	if !v.loaded.Load() {
		v.problem(w, http.StatusServiceUnavailable, "", "the fleet is being read; the API answers once it is")
		return
	}
	items, next := v.entitiesPage(q, cur, digest)
	v.json(w, http.StatusOK, EntityList{Items: items, NextPageToken: next})
}

// entitiesPage is the page of q after cur, and the token of the next page ("" none). A
// walk's first page takes the snapshot the next pages read.
func (v *View) entitiesPage(q Query, cur cursor, digest []byte) ([]fleet.Record, string) {
	now := v.cfg.Now()
	snap, found := v.walks.find(cur.Walk, now)
	switch {
	case cur.Walk == "" && cur.Key == "":
		snap, found = v.fleet.snapshot(), true
	case !found:
		v.log.Debug("an API walk's snapshot is gone; it goes on over the fleet as it is now", "walk", cur.Walk)
	}
	q.After = cur.Key
	var p Page
	if found {
		p = v.fleet.pageOf(snap, q, now)
	} else {
		p = v.fleet.page(q, now)
	}
	if p.Next == "" {
		if cur.Walk != "" {
			v.walks.end(cur.Walk)
		}
		return p.Rows, ""
	}
	walk := cur.Walk
	if walk == "" {
		walk = v.walks.keep(snap, now)
	}
	return p.Rows, v.seal.seal(cursor{Walk: walk, Key: p.Next, Filter: digest})
}

// pageOf is the page q selects of a snapshot.
func (x *index) pageOf(t trees, q Query, now time.Time) Page {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.pageIn(t, q, now)
}

// splitEntityPath reads /api/v1/entities/{key}[/history|/notices]: the key's slashes may be
// escaped (%2F), and then the key is the first segment; unescaped, a last segment history or
// notices names the sub-resource.
func splitEntityPath(r *http.Request) (key, sub string) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/api/v1/entities/")
	segs := strings.Split(rest, "/")
	if strings.Contains(strings.ToUpper(segs[0]), "%2F") {
		key, sub = segs[0], strings.Join(segs[1:], "/")
	} else if n := len(segs); n > 1 && (segs[n-1] == "history" || segs[n-1] == "notices") {
		key, sub = strings.Join(segs[:n-1], "/"), segs[n-1]
	} else {
		key = rest
	}
	if k, err := url.PathUnescape(key); err == nil {
		key = k
	}
	return key, sub
}
