package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
)

// The campaigns' pages. They read what the campaign function stores (campaign.Campaign in the
// campaigns bucket, campaign.Entity in campaign-entities) and the lifecycle events it publishes
// on maint.campaign.evt.<id>: the pages follow the types of shared/campaign, whatever writes them.

// CampaignsPage is the list of campaigns, and its JSON.
type CampaignsPage struct {
	// Available says whether the campaigns bucket exists (no campaign function ran yet when not).
	Available bool              `json:"available"`
	Campaigns []CampaignSummary `json:"campaigns"`
	At        time.Time         `json:"at"`
}

// CampaignSummary is a campaign in the list of campaigns.
type CampaignSummary struct {
	ID         string          `json:"id"`
	Reason     string          `json:"reason,omitempty"`
	Task       domain.Task     `json:"task"`
	Status     campaign.Status `json:"status"`
	Generation int             `json:"generation"`
	Entities   int             `json:"entities"`
	Phases     campaign.Counts `json:"phases"`
	Done       int             `json:"done"`
	Finished   int             `json:"finished"`
	Earliest   string          `json:"earliest"`
	Deadline   string          `json:"deadline"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

func summarizeCampaign(c *campaign.Campaign, r campaign.Report) CampaignSummary {
	return CampaignSummary{ID: c.ID, Reason: c.Spec.Reason, Task: c.Spec.Task, Status: r.Status, Generation: r.Generation,
		Entities: r.Entities, Phases: r.Phases, Done: r.Done, Finished: r.Finished, Earliest: c.Spec.Window.Earliest,
		Deadline: c.Spec.Window.Deadline, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// CampaignPage is one campaign's page, and its JSON: the report of `campaign status -o json`
// with the campaign's spec and its burndown.
type CampaignPage struct {
	campaign.Report
	Reason   string                `json:"reason,omitempty"`
	Task     domain.Task           `json:"task"`
	Spec     campaignspec.Document `json:"spec"`
	Burndown []BurndownPoint       `json:"burndown"`
	At       time.Time             `json:"at"`
}

// BurndownPoint is the campaign's progress at a time: from each lifecycle event, and now.
type BurndownPoint struct {
	At time.Time `json:"at"`
	// Event is the lifecycle event's short type ("created", "progress", …); "" for now.
	Event     string `json:"event,omitempty"`
	Remaining int    `json:"remaining"` // not done
	Done      int    `json:"done"`
	Failed    int    `json:"failed"`
}

func (v *View) campaignsPage(w http.ResponseWriter, r *http.Request) {
	f := negotiate(r)
	if f == formatEvents {
		v.stream(w, r, topic{kind: topicCampaigns}, nil)
		return
	}
	if !v.campaignsRead(w, r) {
		return
	}
	list, ok := v.campaigns.list()
	p := CampaignsPage{Available: ok, Campaigns: list, At: v.cfg.Now().UTC()}
	v.answer(w, r, "campaigns", layout{Title: "Campaigns", Nav: "campaigns", Live: true, Body: p})
}

func (v *View) campaignPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f := negotiate(r)
	if !campaignspec.ValidID(id) {
		v.fail(w, r, http.StatusNotFound, "no campaign has the id "+id)
		return
	}
	if f == formatEvents {
		v.stream(w, r, topic{kind: topicCampaign, key: id}, nil)
		return
	}
	if !v.campaignsRead(w, r) {
		return
	}
	p, ok := v.campaignBody(r.Context(), id)
	if !ok {
		v.fail(w, r, http.StatusNotFound, "no campaign "+id)
		return
	}
	v.answer(w, r, "campaign", layout{Title: "Campaign " + id, Nav: "campaigns", Live: true, Body: p})
}

// campaignBody is campaign id's page (the page's JSON and the API's), false when there is
// no such campaign.
func (v *View) campaignBody(ctx context.Context, id string) (CampaignPage, bool) {
	rep, c, ok := v.campaigns.report(id)
	if !ok {
		return CampaignPage{}, false
	}
	now := v.cfg.Now().UTC()
	p := CampaignPage{Report: rep, Reason: c.Spec.Reason, Task: c.Spec.Task, Spec: c.Spec, At: now}
	var err error
	if p.Burndown, err = v.burndown(ctx, id); err != nil {
		v.log.Warn("campaign page: its events could not be read; the burndown shows now only", "campaign", id, "error", err)
	}
	p.Burndown = append(p.Burndown, BurndownPoint{At: now, Remaining: rep.Entities - rep.Done, Done: rep.Done,
		Failed: rep.Phases.Of(campaign.PhaseFailed)})
	return p, true
}

// campaignsRead answers 503 until the campaigns' buckets are read once, so that a replica
// that has just started does not say that there is no campaign, or none of that id.
func (v *View) campaignsRead(w http.ResponseWriter, r *http.Request) bool {
	if v.read(bucketCampaigns, bucketEntities) {
		return true
	}
	v.fail(w, r, http.StatusServiceUnavailable, "the campaigns are being read; this page answers once they are")
	return false
}

// burndown is the campaign's progress at each of its lifecycle events, oldest first.
func (v *View) burndown(ctx context.Context, id string) ([]BurndownPoint, error) {
	var out []BurndownPoint
	err := v.cl.EachStored(ctx, domain.EventsStream, domain.CampaignEventSubject(id), func(b []byte, _ uint64) error {
		var ev campaign.Event
		if json.Unmarshal(b, &ev) != nil || !slices.Contains(campaign.EventTypes, ev.Type) {
			return nil // a campaign command's outcome, or what does not read
		}
		out = append(out, BurndownPoint{At: ev.At.UTC(), Event: ev.Type.Short(), Remaining: ev.Phases.Total() - ev.Phases.Done(),
			Done: ev.Phases.Done(), Failed: ev.Phases.Of(campaign.PhaseFailed)})
		return nil
	})
	if errors.Is(err, client.ErrNotProvisioned) {
		err = nil
	}
	return out, err
}
