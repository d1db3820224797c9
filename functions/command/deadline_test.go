package command_test

import (
	"context"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignstore"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// The deadline a customer's Reschedule must respect is that of the campaign whose window the
// record holds, read from the campaigns bucket; none for a campaign gone.
func TestDeadlines_OfTheRecordsCampaign(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	doc := campaignspec.Document{ID: "pucm", Task: domain.TaskEverything,
		Selection: campaignspec.SelectionDocument{Prefixes: []string{"/subscriptions/s"}},
		Window:    campaignspec.WindowDocument{Length: "4h", Earliest: "2026-12-15T00:00:00Z", Deadline: "2027-01-15T00:00:00Z"},
		Spread:    campaignspec.SpreadDocument{Across: "24h", Slot: "1h", MaxPerSlot: 10}, AnnounceLead: "24h"}
	s, rej := doc.Compile()
	if rej != nil {
		t.Fatal(rej)
	}
	st, err := campaignstore.Open(ctx, env.JS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, campaign.NewCampaign(s, time.Now()), 0); err != nil {
		t.Fatal(err)
	}
	of := command.DeadlineOf(env.JS)
	for _, tc := range []struct {
		ref  domain.CampaignRef
		want string
	}{
		{domain.CampaignRef{ID: "pucm", Generation: 1}, "2027-01-15T00:00:00Z"},
		{domain.CampaignRef{ID: "pucm", Generation: 1}, "2027-01-15T00:00:00Z"}, // kept from the first read
		{domain.CampaignRef{ID: "gone", Generation: 1}, ""},
	} {
		got, err := of(ctx, tc.ref)
		if err != nil || (tc.want == "") != got.IsZero() || tc.want != "" && got.Format(time.RFC3339) != tc.want {
			t.Errorf("%+v: %s %v, want %q", tc.ref, got, err, tc.want)
		}
	}
}
