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
}

// PolicyList is the policies in force, by scope (one page: there are few).
type PolicyList struct {
	Items         []PolicyItem `json:"items"`
	NextPageToken string       `json:"nextPageToken,omitempty"`
}

// CampaignList is the campaigns (one page: there are few).
type CampaignList struct {
	Items         []CampaignSummary `json:"items"`
	NextPageToken string            `json:"nextPageToken,omitempty"`
}

func (v *View) apiPolicies(w http.ResponseWriter, r *http.Request) {
	if !v.read(bucketPolicies) {
		v.problem(w, http.StatusServiceUnavailable, "", "the policies are being read; the API answers once they are")
		return
	}
	v.json(w, http.StatusOK, PolicyList{Items: v.fleet.policyItems(viewer(r))})
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
		out = append(out, PolicyItem{Scope: s.ID, Level: s.Level.String(), Since: in.Since.UTC(), Document: in.Policy.Document()})
	}
	return out
}

func (v *View) apiCampaigns(w http.ResponseWriter, r *http.Request) {
	if !v.read(bucketCampaigns, bucketEntities) {
		v.problem(w, http.StatusServiceUnavailable, "", "the campaigns are being read; the API answers once they are")
		return
	}
	list, _ := v.campaigns.list()
	if list == nil {
		list = []CampaignSummary{}
	}
	v.json(w, http.StatusOK, CampaignList{Items: list})
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
