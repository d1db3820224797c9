package dashboards_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	fn "maintsignals/functions/campaign"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// campaignID is the campaign of the fleet: four entities of their own, all announced, one of
// whose updates succeeded. It runs after the fleet's last export, so the fleet's gauges and
// the command function's counters stay as the fleet's expectations say.
const campaignID = "dash"

// campaignIDs are the campaign's entities.
func campaignIDs() []string {
	var out []string
	for _, n := range []string{"a", "b", "c", "d"} {
		out = append(out, idPrefix+"campaign-"+n)
	}
	return out
}

// runCampaign creates the campaign, lets the campaign function (its burndown exported over
// OTLP at each of its passes) announce it, succeeds one update and waits until a pass has
// exported that; it returns the campaign's deadline.
func (s *stack) runCampaign(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	testenv.RunCampaigns(t, s.env.JS, fn.Config{Telemetry: s.tel}, 300*time.Millisecond)
	ids := campaignIDs()
	data := []byte(strings.Join(ids, "\n") + "\n")
	l, err := campaign.ParseList(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := campaignstore.PutList(ctx, s.env.JS, l, data); err != nil {
		t.Fatal(err)
	}
	ref := l.Ref(l.SHA256)
	earliest := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	deadline := earliest.Add(72 * time.Hour)
	doc := campaign.Document{ID: campaignID, Task: domain.TaskEverything, Selection: campaign.SelectionDocument{List: &ref},
		Window: campaign.WindowDocument{Length: "1h", Earliest: earliest.Format(time.RFC3339), Deadline: deadline.Format(time.RFC3339)},
		Spread: campaign.SpreadDocument{Across: "4h", Slot: "15m", MaxPerSlot: 10}, AnnounceLead: "336h"}
	cl, err := client.New(s.env.NC, testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendCampaign(ctx, campaign.Control{ID: "dash-create", Campaign: campaignID, Action: campaign.ActionCreate, Spec: &doc}); err != nil {
		t.Fatalf("create the campaign: %v", err)
	}
	for _, id := range ids {
		testenv.WaitEvents(t, s.env.JS, domain.MustKey(id), 1, 30*time.Second)
	}
	s.send(t, ctx, [][]domain.Command{{{ResourceID: ids[0], Task: domain.TaskEverything}, {ResourceID: ids[0], Task: domain.TaskUpdateSucceeded}}})
	testenv.Eventually(t, 30*time.Second, "the campaign function observing the update", func() bool {
		c, err := cl.Campaign(ctx, campaignID)
		return err == nil && c.Tally.Total().Of(campaign.PhaseSucceeded) == 1
	})
	time.Sleep(time.Second) // a pass or two have exported it
	return deadline
}
