package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/policy"
)

// PolicyItem is a customer's policy in force: its scope, since when (the stored time of its
// revision) and its document.
type PolicyItem struct {
	Scope    string          `json:"scope"`
	Level    string          `json:"level"`
	Since    time.Time       `json:"since"`
	Document policy.Document `json:"document"`
	key      string
}

// PolicyList is a page of the policies in force, by scope key.
type PolicyList struct {
	Items         []PolicyItem `json:"items"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// CampaignList is a page of the campaigns, by id.
type CampaignList struct {
	Items         []CampaignSummary `json:"items"`
	NextPageToken string            `json:"nextPageToken,omitempty"`
}

func (v *View) apiPolicies(w http.ResponseWriter, r *http.Request) {
	if !v.read(bucketPolicies) {
		v.problem(w, http.StatusServiceUnavailable, "", "the policies are being read; the API answers once they are")
		return
	}
	items, next, ok := listPage(v, w, r, "policies", v.fleet.policyItems(viewer(r)), func(p PolicyItem) string { return p.key })
	if ok {
		v.json(w, http.StatusOK, PolicyList{Items: items, NextPageToken: next})
	}
}

// listPage is the page of items (in the order of their keys) after the key r's pageToken
// carries, and the token of the next page ("" none); false when r's parameters do not read
// (the problem is answered).
func listPage[T any](v *View, w http.ResponseWriter, r *http.Request, kind string, items []T, key func(T) string) ([]T, string, bool) {
	n, err := pageSize(r)
	if err != nil {
		v.failParam(w, err)
		return nil, "", false
	}
	digest := filterDigest(kind, viewer(r).name())
	from := 0
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		cur, err := v.seal.open(tok, digest)
		if err != nil {
			v.failParam(w, &badParam{"pageToken", err})
			return nil, "", false
		}
		from, _ = slices.BinarySearchFunc(items, cur.Key, func(it T, k string) int { return strings.Compare(key(it), k+"\x00") })
	}
	page := items[from:min(from+n, len(items))]
	if from+n >= len(items) {
		return page, "", true
	}
	return page, v.seal.seal(cursor{Key: key(page[len(page)-1]), Filter: digest}), true
}

// policyItems are the policies in force that bear on the entities c sees (nil: all), by scope
// key: a customer sees the policies of its scopes, those under them, and those above them that
// its entities follow.
func (x *index) policyItems(c *Customer) []PolicyItem {
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.policies))
	for k, in := range x.policies {
		if in.Policy != nil && c.overlaps(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]PolicyItem, 0, len(keys))
	for _, k := range keys {
		in := x.policies[k]
		s := in.Policy.Scope()
		out = append(out, PolicyItem{Scope: s.ID, Level: s.Level.String(), Since: in.Since.UTC(), Document: in.Policy.Document(), key: k})
	}
	return out
}

func (v *View) apiCampaigns(w http.ResponseWriter, r *http.Request) {
	if !v.read(bucketCampaigns, bucketEntities) {
		v.problem(w, http.StatusServiceUnavailable, "", "the campaigns are being read; the API answers once they are")
		return
	}
	list, _ := v.campaigns.list()
	slices.SortFunc(list, func(a, b CampaignSummary) int { return strings.Compare(a.ID, b.ID) })
	items, next, ok := listPage(v, w, r, "campaigns", list, func(c CampaignSummary) string { return c.ID })
	if ok {
		v.json(w, http.StatusOK, CampaignList{Items: items, NextPageToken: next})
	}
}

func (v *View) apiCampaign(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !v.read(bucketCampaigns, bucketEntities) {
		v.problem(w, http.StatusServiceUnavailable, "", "the campaigns are being read; the API answers once they are")
		return
	}
	p, ok := v.campaignBody(r.Context(), id)
	if !campaignspec.ValidID(id) || !ok {
		v.problem(w, http.StatusNotFound, "", "no campaign "+strings.TrimSpace(id))
		return
	}
	v.json(w, http.StatusOK, p)
}

func (v *View) apiDocument(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(v.doc)
}
