package campaign_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec/spectest"
)

func wavePlan(t *testing.T) *campaign.Plan {
	t.Helper()
	s := spectest.MustSpec(t, spectest.Edit(t, "waves[1].prefixes", []any{"/subscriptions/b"}, "spread.maxPerSlot", 2, "spread.maxPerSlotPerSubscription", 1,
		"spread.across", "15m", "window.deadline", "2026-12-15T05:00:00Z", "window.length", "4h"))
	// slots 00:00 and 00:15 and 00:30 and 00:45 and 01:00; two a slot, one of a subscription.
	ids := []string{`/subscriptions/aaaa/c"quoted"`, `/subscriptions/aaaa/c\back`, "/subscriptions/aaaa/c<é>", "/subscriptions/aaaa/c4",
		"/subscriptions/aaaa/c5", "/subscriptions/aaaa/c6", "/subscriptions/b/c1", "/subscriptions/b/c2", "/subscriptions/z/c1"}
	return campaign.NewPlan(s, entities(t, ids...), nil, campaign.Settings{}, spectest.UTC("2026-11-01T00:00:00Z"))
}

func TestWriteJSON_TheDryRunOfTheContract(t *testing.T) {
	p := wavePlan(t)
	var summary bytes.Buffer
	if err := p.WriteJSON(&summary, false); err != nil {
		t.Fatal(err)
	}
	want := `{"entities":9,"planned":7,"skipped":{"NoAllowedSlot":1,"NoWave":1},"slots":[` +
		`{"start":"2026-12-15T00:00:00Z","count":2},{"start":"2026-12-15T00:15:00Z","count":2},{"start":"2026-12-15T00:30:00Z","count":1},` +
		`{"start":"2026-12-15T00:45:00Z","count":1},{"start":"2026-12-15T01:00:00Z","count":1}]}` + "\n"
	if summary.String() != want {
		t.Fatalf("dry run\n%s\nwant\n%s", summary.String(), want)
	}
	var full bytes.Buffer
	if err := p.WriteJSON(&full, true); err != nil {
		t.Fatal(err)
	}
	var d campaign.DryRun
	if err := json.Unmarshal(full.Bytes(), &d); err != nil {
		t.Fatalf("%v\n%s", err, full.Bytes())
	}
	if d.Entities != 9 || d.Planned != 7 || len(d.Plan) != 9 || len(d.Slots) != 5 {
		t.Fatalf("decoded %+v", d)
	}
	for i, e := range d.Plan {
		pl := p.At(i)
		if e.ResourceID != pl.ResourceID || e.Skipped != pl.Skipped || (e.Window == nil) != (pl.Window == nil) ||
			e.Window != nil && (!e.Window.Start.Equal(pl.Window.Start) || !e.Window.End.Equal(pl.Window.End)) {
			t.Errorf("entry %d: %+v, the plan has %+v", i, e, pl)
		}
	}
	if d.Plan[8].Skipped != campaign.NoWave || d.Plan[5].Skipped != campaign.NoAllowedSlot || d.Plan[0].Wave != "canary" || d.Plan[6].Wave != "rest" || d.Plan[8].Wave != "" {
		t.Errorf("skips and waves: %+v", d.Plan)
	}
	// Each line of the plan is what encoding/json writes for the entry.
	sc := bufio.NewScanner(&full)
	sc.Scan()
	for i := 0; sc.Scan() && i < len(d.Plan); i++ {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(d.Plan[i])
		if got := strings.TrimPrefix(sc.Text(), ","); got != strings.TrimSpace(b.String()) {
			t.Errorf("line %d: %s\nencoding/json: %s", i, got, b.String())
		}
	}
}

func TestWriteJSON_AnEmptyPlan(t *testing.T) {
	p := campaign.NewPlan(spectest.MustSpec(t, []byte(spectest.Example)), nil, nil, campaign.Settings{}, before)
	var b bytes.Buffer
	if err := p.WriteJSON(&b, true); err != nil {
		t.Fatal(err)
	}
	if want := `{"entities":0,"planned":0,"skipped":{"NoAllowedSlot":0,"NoWave":0},"slots":[]}` + "\n"; b.String() != want {
		t.Errorf("got %s", b.String())
	}
}

func TestRender_HistogramSkipsAndWaves(t *testing.T) {
	var b strings.Builder
	if err := wavePlan(t).Render(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Campaign pucm-2026-12: Everything on 9 entities: 7 planned, 2 skipped.",
		"Windows of 4h on 15m slots from 2026-12-15 00:00 UTC, preferred across 15m, ending by 2026-12-15 05:00 UTC.",
		"Each announced 2w before its window; at most 2 windows a slot, 1 of a subscription.",
		"Windows start from 2026-12-15 00:00 UTC to 2026-12-15 01:00 UTC in 5 slots; the busiest holds 2 (2026-12-15 00:00 UTC).",
		"Window starts per hour (UTC):",
		"2026-12-15 00:00  ████████████████████████████████████████  6",
		"2026-12-15 01:00  ██████▊                                   1", // 1/6 of 40 cells, rounded up to an eighth
		"NoAllowedSlot  1", "NoWave         1",
		"canary       6 entities, 5 planned; waits for approve",
		"rest         2 entities, 2 planned; halts when more than 2% fail",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendering lacks %q:\n%s", want, out)
		}
	}
}

func TestRender_ByDayOverWeeks(t *testing.T) {
	s := grid(t, "20d", 30, 1000, 0)
	var ids []string
	for i := range 2000 {
		ids = append(ids, "/c"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+strings.Repeat("y", i/26))
	}
	var b strings.Builder
	campaign.NewPlan(s, entities(t, ids...), nil, campaign.Settings{}, before).Render(&b)
	out := b.String()
	if !strings.Contains(out, "Window starts per day (UTC):") || !strings.Contains(out, "2026-12-01  ") || !strings.Contains(out, "Skipped: none.") {
		t.Errorf("rendering:\n%s", out)
	}
	if rows := strings.Count(out, "\n  2026-12-"); rows != 20 {
		t.Errorf("%d rows of days, want 20:\n%s", rows, out)
	}
}
