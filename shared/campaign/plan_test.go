package campaign_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// grid is a spec of hourly slots from 2026-12-01, windows of an hour, no waves.
func grid(t testing.TB, across string, days int, maxPerSlot, perSub int, more ...any) *campaignspec.Spec {
	t.Helper()
	pairs := append([]any{
		"window.earliest", "2026-12-01T00:00:00Z",
		"window.deadline", spectest.UTC("2026-12-01T00:00:00Z").Add(time.Duration(days) * domain.Day).Format(time.RFC3339),
		"window.length", "1h", "spread.slot", "1h", "spread.across", across,
		"spread.maxPerSlot", maxPerSlot, "spread.maxPerSlotPerSubscription", perSub,
		"announceLead", "14d", "waves", spectest.Del,
	}, more...)
	return spectest.MustSpec(t, spectest.Edit(t, pairs[0].(string), pairs[1], pairs[2:]...))
}

func entities(t testing.TB, ids ...string) campaign.Selection {
	t.Helper()
	l, err := campaign.ParseList(strings.NewReader(strings.Join(ids, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return l.Entries
}

// before is a time long enough before the campaign that notice never binds.
var before = spectest.UTC("2026-11-01T00:00:00Z")

// preferred is the contract's formula, computed here on its own.
func preferred(seed, key string, n int) int {
	sum := sha256.Sum256([]byte(seed + "/" + key))
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(n))
}

func startOf(s *campaignspec.Spec, k int) time.Time { return s.Earliest.Add(time.Duration(k) * s.Slot) }

func slotOf(s *campaignspec.Spec, w *domain.Window) int { return int(w.Start.Sub(s.Earliest) / s.Slot) }

func TestPlan_PreferredSlotIsTheSaltedHashOfTheKey(t *testing.T) {
	s := grid(t, "10d", 12, 1000, 0)
	var ids []string
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("/subscriptions/s%d/resourceGroups/rg/providers/P/c%d", i%7, i))
	}
	sel := entities(t, ids...)
	p := campaign.NewPlan(s, sel, nil, campaign.Settings{}, before)
	moved := 0
	for i := range p.Len() {
		pl := p.At(i)
		want := preferred("pucm-2026-12", pl.Key, 240)
		if pl.Window == nil || slotOf(s, pl.Window) != want || pl.Window.End.Sub(pl.Window.Start) != time.Hour {
			t.Fatalf("%s: window %+v, want slot %d (no cap binds)", pl.Key, pl.Window, want)
		}
		if want != preferred("another-seed", pl.Key, 240) {
			moved++
		}
	}
	if moved < 40 {
		t.Errorf("another seed moves %d of 50 entities: the seed should salt the hash", moved)
	}
	seeded := campaign.NewPlan(grid(t, "10d", 12, 1000, 0, "spread.seed", "another-seed"), sel, nil, campaign.Settings{}, before)
	for i := range seeded.Len() {
		if pl := seeded.At(i); slotOf(s, pl.Window) != preferred("another-seed", pl.Key, 240) {
			t.Fatalf("%s: with a seed, slot %d", pl.Key, slotOf(s, pl.Window))
		}
	}
}

// With across equal to one slot, every entity prefers slot 0: the caps decide.
func TestPlan_CapsPushEntitiesToLaterSlotsInKeyOrder(t *testing.T) {
	s := grid(t, "1h", 1, 3, 2)
	sel := entities(t, "/subscriptions/a/c1", "/subscriptions/a/c2", "/subscriptions/a/c3", "/subscriptions/a/c4",
		"/subscriptions/a/c5", "/subscriptions/b/c1", "/subscriptions/c/c1", "/subscriptions/c/c2")
	p := campaign.NewPlan(s, sel, nil, campaign.Settings{}, before)
	// a: 2 a slot; b and c fill the third place of a slot as it comes.
	want := map[string]int{"a/c1": 0, "a/c2": 0, "a/c3": 1, "a/c4": 1, "a/c5": 2, "b/c1": 0, "c/c1": 1, "c/c2": 2}
	for i := range p.Len() {
		pl := p.At(i)
		short := strings.TrimPrefix(pl.Key, "subscriptions/")
		if pl.Window == nil || slotOf(s, pl.Window) != want[short] {
			t.Errorf("%s: %+v, want slot %d", short, pl.Window, want[short])
		}
	}
	got := p.Slots()
	if len(got) != 3 || got[0].Count != 3 || got[1].Count != 3 || got[2].Count != 2 || !got[1].Start.Equal(startOf(s, 1)) {
		t.Errorf("slots %+v", got)
	}
}

func TestPlan_SkipsWhatTheDeadlineLeavesNoSlotFor(t *testing.T) {
	s := grid(t, "1h", 1, 10, 0, "window.deadline", "2026-12-01T03:00:00Z") // slots 0, 1 and 2
	var ids []string
	for i := range 35 {
		ids = append(ids, fmt.Sprintf("/c%02d", i))
	}
	p := campaign.NewPlan(s, entities(t, ids...), nil, campaign.Settings{}, before)
	if p.Planned() != 30 || p.Skipped(campaign.NoAllowedSlot) != 5 {
		t.Fatalf("planned %d, skipped %d; want 30 and 5", p.Planned(), p.Skipped(campaign.NoAllowedSlot))
	}
	for i := 30; i < 35; i++ {
		if pl := p.At(i); pl.Window != nil || pl.Skipped != campaign.NoAllowedSlot {
			t.Errorf("%s: %+v, want skipped (the last in key order)", pl.Key, pl)
		}
	}
	if e := p.Entity(34); e.Phase != campaign.PhaseSkipped || e.Reason != "NoAllowedSlot" || e.Window != nil {
		t.Errorf("entity of a skip: %+v", e)
	}
	if e := p.Entity(0); e.Phase != campaign.PhasePlanned || e.Generation != 1 || e.Window == nil || e.Wave != 0 {
		t.Errorf("entity of a window: %+v", e)
	}
}

// The window must start at least Margin plus the notice in force after now, and the notice
// must not exceed announceLead (the announcement goes out announceLead before the window).
func TestPlan_NoticeAndNow(t *testing.T) {
	s := grid(t, "1h", 3, 100, 0, "announceLead", "24h")
	one := entities(t, "/c")
	now := spectest.UTC("2026-12-01T05:30:00Z")
	cases := []struct {
		name string
		set  campaign.Settings
		pol  *policy.Policy
		want time.Time
		skip bool
	}{
		{"only the margin", campaign.Settings{}, nil, spectest.UTC("2026-12-01T06:00:00Z"), false},
		{"a wider margin", campaign.Settings{Margin: 31 * time.Minute}, nil, spectest.UTC("2026-12-01T07:00:00Z"), false},
		{"the function's notice", campaign.Settings{MinNotice: 12 * time.Hour}, nil, spectest.UTC("2026-12-01T18:00:00Z"), false},
		{"a policy's notice larger", campaign.Settings{MinNotice: time.Hour}, anyTime(t, "20h"), spectest.UTC("2026-12-02T02:00:00Z"), false},
		{"a notice equal to the lead", campaign.Settings{MinNotice: 24 * time.Hour}, nil, spectest.UTC("2026-12-02T06:00:00Z"), false},
		{"a notice longer than the lead", campaign.Settings{MinNotice: 25 * time.Hour}, nil, time.Time{}, true},
		{"a policy's notice longer than the lead", campaign.Settings{}, anyTime(t, "2d"), time.Time{}, true},
		{"no slot left after the notice", campaign.Settings{MinNotice: 23 * time.Hour}, nil, time.Time{}, true},
	}
	for _, c := range cases {
		if c.name == "no slot left after the notice" {
			now = spectest.UTC("2026-12-03T01:30:00Z") // 01:30 + 23h02 is past the last slot, 23:00 on the 3rd
		}
		p := campaign.NewPlan(s, one, func(string) *policy.Policy { return c.pol }, c.set, now)
		pl := p.At(0)
		switch {
		case c.skip && pl.Skipped != campaign.NoAllowedSlot:
			t.Errorf("%s: %+v, want skipped", c.name, pl.Window)
		case !c.skip && (pl.Window == nil || !pl.Window.Start.Equal(c.want)):
			t.Errorf("%s: %+v, want a window at %s", c.name, pl.Window, c.want)
		}
	}
}

// anyTime is a policy of any time, with a minimum notice.
func anyTime(t testing.TB, notice string) *policy.Policy {
	t.Helper()
	p, rej := policy.Document{Scope: "/subscriptions/any", MinNotice: notice}.Compile()
	if rej != nil {
		t.Fatal(rej)
	}
	return p
}

func compilePolicy(t testing.TB, doc policy.Document) *policy.Policy {
	t.Helper()
	p, rej := doc.Compile()
	if rej != nil {
		t.Fatal(rej)
	}
	return p
}

func TestPlan_WindowsLieInsideThePolicy(t *testing.T) {
	s := grid(t, "1h", 10, 1, 0, "window.length", "2h")
	nightly := compilePolicy(t, policy.Document{Scope: "/subscriptions/n", TimeZone: "Europe/Berlin",
		Windows:   []policy.Window{{RRule: "FREQ=DAILY", Start: "22:00", Duration: "3h"}},
		Blackouts: []policy.Blackout{{Start: "2026-12-02", End: "2026-12-04"}}})
	short := compilePolicy(t, policy.Document{Scope: "/subscriptions/s",
		Windows: []policy.Window{{RRule: "FREQ=DAILY", Start: "01:00", Duration: "1h"}}})
	pols := func(key string) *policy.Policy {
		switch campaign.SubscriptionKey(key) {
		case "subscriptions/n":
			return nightly
		case "subscriptions/s":
			return short
		}
		return nil
	}
	sel := entities(t, "/subscriptions/n/c1", "/subscriptions/n/c2", "/subscriptions/n/c3", "/subscriptions/s/c1", "/subscriptions/x/c1")
	p := campaign.NewPlan(s, sel, pols, campaign.Settings{}, before)
	// Berlin 22:00-01:00 is 21:00Z-00:00Z; a 2h window starts at 21:00Z or 22:00Z. The
	// blackout starts at local midnight on the 2nd (23:00Z on the 1st), so the 1st's night
	// keeps only 21:00Z-23:00Z; the nights of the 2nd and 3rd are blacked out.
	want := map[string]string{
		"subscriptions/n/c1": "2026-12-01T21:00:00Z", "subscriptions/n/c2": "2026-12-04T21:00:00Z",
		"subscriptions/n/c3": "2026-12-04T22:00:00Z", "subscriptions/x/c1": "2026-12-01T00:00:00Z",
	}
	for i := range p.Len() {
		pl := p.At(i)
		if pl.Key == "subscriptions/s/c1" {
			if pl.Skipped != campaign.NoAllowedSlot {
				t.Errorf("a 2h window in a 1h policy window: %+v, want skipped", pl.Window)
			}
			continue
		}
		if pl.Window == nil || !pl.Window.Start.Equal(spectest.UTC(want[pl.Key])) {
			t.Errorf("%s: %+v, want %s", pl.Key, pl.Window, want[pl.Key])
		}
	}
}

func TestPlan_NoWave(t *testing.T) {
	s := spectest.MustSpec(t, spectest.Edit(t, "waves[1].prefixes", []any{"/subscriptions/b"}, "spread.maxPerSlotPerSubscription", spectest.Del))
	sel := entities(t, "/subscriptions/aaaa/c", "/subscriptions/b/c", "/subscriptions/c/c")
	p := campaign.NewPlan(s, sel, nil, campaign.Settings{}, spectest.UTC("2026-11-01T00:00:00Z"))
	if p.Skipped(campaign.NoWave) != 1 || p.Planned() != 2 || p.At(2).Skipped != campaign.NoWave || p.At(2).Wave != -1 {
		t.Fatalf("%+v %+v", p.Summary(), p.At(2))
	}
	if p.At(0).Wave != 0 || p.At(1).Wave != 1 {
		t.Errorf("waves %d %d", p.At(0).Wave, p.At(1).Wave)
	}
	if e := p.Entity(2); e.Phase != campaign.PhaseSkipped || e.Reason != "NoWave" || e.Wave != -1 {
		t.Errorf("entity %+v", e)
	}
}
