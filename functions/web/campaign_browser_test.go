package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	fn "maintsignals/functions/campaign"
	"maintsignals/functions/web"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// A campaign made by the campaign function, watched in the browser: created from a stored
// list, its clusters announced, then an updater works through them; the campaign page's
// burndown moves as the campaign function observes the outcomes, live, until it says
// completed.
func TestBrowser_CampaignFunctionBurndownMoves(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t, web.Config{})
	testenv.RunCampaigns(t, s.env.JS, fn.Config{}, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = rid(fmt.Sprintf("s%d", 1+i%2), fmt.Sprintf("b%d", i))
	}
	ref := testenv.UploadList(t, ctx, s.env.JS, ids)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	doc := campaignspec.Document{ID: "live-1", Reason: "control plane upgrade", Task: domain.TaskEverything,
		Selection: campaignspec.SelectionDocument{List: &ref},
		Window:    campaignspec.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339), Deadline: earliest.Add(72 * time.Hour).Format(time.RFC3339)},
		Spread:    campaignspec.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 10}, AnnounceLead: "336h"}
	if _, err := s.cl.SendCampaign(ctx, campaign.Control{ID: "live-create", Campaign: "live-1", Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		t.Fatalf("create: %v", err)
	}

	b.do(chromedp.Navigate(s.url + "/campaigns/live-1"))
	b.waitFor("every cluster announced", `document.querySelector('[data-phase="announced"]')?.textContent === "10"`, 10*time.Second)
	b.waitFor("the live stream", `document.querySelector(".live-note").textContent.includes("live")`, 5*time.Second)
	before := eval[string](b, `document.querySelector("polyline.line").getAttribute("points")`)
	send := func(id string, task domain.Task) {
		t.Helper()
		c := domain.Command{ID: fmt.Sprintf("%s-%s", task, id[len(id)-2:]), ResourceID: id, Task: task, Actor: "updater"}
		if task == domain.TaskUpdateFailed {
			c.Error = "drain timed out"
		}
		if _, err := s.cl.Send(ctx, c); err != nil {
			t.Fatalf("%s %s: %v", task, id, err)
		}
	}
	for _, id := range ids[:4] {
		send(id, domain.TaskEverything)
		send(id, domain.TaskUpdateSucceeded)
	}
	b.waitFor("the burndown moving", `document.querySelector('[data-phase="succeeded"]').textContent === "4"`+
		` && document.querySelector('[data-phase="announced"]').textContent === "6"`+
		` && document.querySelector("polyline.line").getAttribute("points") !== `+quoted(before), 10*time.Second)
	for i, id := range ids[4:] {
		send(id, domain.TaskEverything)
		if i == 0 {
			send(id, domain.TaskUpdateFailed)
		} else {
			send(id, domain.TaskUpdateSucceeded)
		}
	}
	b.waitFor("the campaign completed", `document.querySelector('[data-phase="succeeded"]').textContent === "9"`+
		` && document.querySelector('[data-phase="failed"]').textContent === "1"`+
		` && document.querySelector('#status [data-status]').dataset.status === "completed"`, 10*time.Second)
	b.accessible("campaign page of a completed campaign")
	b.screenshot("campaign-live")
}
