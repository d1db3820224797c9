package campaign_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// trial is one random campaign: a spec, entities over a few subscriptions, their policies,
// the function's settings and the time of the plan.
type trial struct {
	spec *campaignspec.Spec
	sel  campaign.Selection
	pols campaign.Policies
	set  campaign.Settings
	now  time.Time
}

func randomTrial(t *testing.T, r *rand.Rand) trial {
	slot := []time.Duration{15 * time.Minute, time.Hour}[r.IntN(2)]
	length := time.Duration(1+r.IntN(4)) * time.Hour
	n := 1 + r.IntN(48)
	span := time.Duration(n)*slot + length + time.Duration(r.IntN(100))*slot
	maxPerSlot := 1 + r.IntN(5)
	earliest := spectest.UTC("2026-12-10T00:00:00Z").Add(time.Duration(r.IntN(96)) * 15 * time.Minute)
	s := spectest.MustSpec(t, spectest.Edit(t, "window.earliest", earliest.Format(time.RFC3339),
		"window.deadline", earliest.Add(span).Format(time.RFC3339),
		"window.length", domain.FormatDuration(length), "spread.slot", domain.FormatDuration(slot),
		"spread.across", domain.FormatDuration(time.Duration(n)*slot),
		"spread.maxPerSlot", maxPerSlot, "spread.maxPerSlotPerSubscription", r.IntN(maxPerSlot+1),
		"spread.seed", fmt.Sprintf("seed-%d", r.IntN(1000)),
		"announceLead", []string{"0", "6h", "1d", "14d"}[r.IntN(4)], "waves", spectest.Del))
	var ids []string
	for i := range 1 + r.IntN(200) {
		switch sub := r.IntN(7); sub {
		case 6:
			ids = append(ids, fmt.Sprintf("/tenants/t/clusters/c%d", i)) // no subscription: its own
		default:
			ids = append(ids, fmt.Sprintf("/subscriptions/s%d/resourceGroups/rg%d/providers/P/c%d", sub, r.IntN(3), i))
		}
	}
	bySub := map[string]*policy.Policy{}
	for sub := range 6 {
		bySub[fmt.Sprintf("subscriptions/s%d", sub)] = policies(t)[r.IntN(len(policies(t)))]
	}
	return trial{
		spec: s, sel: entities(t, ids...),
		pols: func(key string) *policy.Policy { return bySub[campaign.SubscriptionKey(key)] },
		set:  campaign.Settings{MinNotice: []time.Duration{0, time.Hour, 12 * time.Hour, 30 * time.Hour}[r.IntN(4)]},
		now:  earliest.Add(-48 * time.Hour).Add(time.Duration(r.IntN(72*60)) * time.Minute),
	}
}

var policyCache []*policy.Policy

// policies are the policies trials draw from (nil: none).
func policies(t testing.TB) []*policy.Policy {
	if policyCache == nil {
		policyCache = []*policy.Policy{nil, nil,
			compilePolicy(t, policy.Document{Scope: "/subscriptions/p1", TimeZone: "Europe/Berlin",
				Windows:   []policy.Window{{RRule: "FREQ=DAILY", Start: "22:00", Duration: "6h"}},
				Blackouts: []policy.Blackout{{Start: "2026-12-12", End: "2026-12-14"}}}),
			compilePolicy(t, policy.Document{Scope: "/subscriptions/p2", TimeZone: "America/New_York", MinNotice: "8h",
				Windows: []policy.Window{{RRule: "FREQ=WEEKLY;BYDAY=MO,WE,FR", Start: "09:30", Duration: "5h"}}}),
			compilePolicy(t, policy.Document{Scope: "/subscriptions/p3", MinNotice: "6h",
				Blackouts: []policy.Blackout{{Start: "2026-12-11", End: "2026-12-12"}}}),
		}
	}
	return policyCache
}

// oracle plans as the contract reads, slot after slot, with nothing clever.
func oracle(tr trial) []int {
	s := tr.spec
	counts, subCounts := map[int]int{}, map[string]int{}
	out := make([]int, len(tr.sel))
	for i, e := range tr.sel {
		pol := tr.pols(e.Key)
		notice := policy.NoticeInForce(pol, tr.set.MinNotice)
		sub := campaign.SubscriptionKey(e.Key)
		out[i] = -1
		for k := preferred(s.Seed, e.Key, s.PreferredSlots()); notice <= s.AnnounceLead; k++ {
			w := domain.Window{Start: startOf(s, k), End: startOf(s, k).Add(s.Length)}
			if w.End.After(s.Deadline) {
				break
			}
			full := counts[k] >= s.MaxPerSlot || s.MaxPerSubscription > 0 && subCounts[fmt.Sprint(sub, k)] >= s.MaxPerSubscription
			if w.Start.Before(tr.now.Add(campaign.DefaultMargin+notice)) || full || pol != nil && !pol.Allows(w) {
				continue
			}
			out[i] = k
			counts[k]++
			subCounts[fmt.Sprint(sub, k)]++
			break
		}
	}
	return out
}

func TestPlan_EqualsTheContractSlotBySlot(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 11))
	for n := range 300 {
		tr := randomTrial(t, r)
		p := campaign.NewPlan(tr.spec, tr.sel, tr.pols, tr.set, tr.now)
		want := oracle(tr)
		for i, k := range want {
			pl := p.At(i)
			if got := -1; pl.Window != nil {
				got = slotOf(tr.spec, pl.Window)
				if got != k {
					t.Fatalf("trial %d, %s: slot %d, the contract says %d", n, pl.Key, got, k)
				}
			} else if k != -1 {
				t.Fatalf("trial %d, %s: skipped, the contract says slot %d", n, pl.Key, k)
			}
		}
		checkInvariants(t, n, tr, p)
	}
}

// checkInvariants checks the plan against what it promises, without the oracle.
func checkInvariants(t *testing.T, n int, tr trial, p *campaign.Plan) {
	s := tr.spec
	counts, subCounts := map[time.Time]int{}, map[string]int{}
	for pl := range p.All() {
		if pl.Window == nil {
			continue
		}
		w := *pl.Window
		pol := tr.pols(pl.Key)
		notice := policy.NoticeInForce(pol, tr.set.MinNotice)
		announced := later(tr.now, w.Start.Add(-s.AnnounceLead))
		counts[w.Start]++
		subCounts[campaign.SubscriptionKey(pl.Key)+w.Start.String()]++
		switch {
		case w.End.After(s.Deadline) || w.Start.Before(s.Earliest) || w.End.Sub(w.Start) != s.Length:
			t.Fatalf("trial %d, %s: window %v outside [earliest, deadline]", n, pl.Key, w)
		case w.Start.Sub(s.Earliest)%s.Slot != 0:
			t.Fatalf("trial %d, %s: window %v not on a slot", n, pl.Key, w)
		case pol != nil && !pol.Allows(w):
			t.Fatalf("trial %d, %s: window %v not allowed by its policy: %s", n, pl.Key, w, pol.Why(w))
		case w.Start.Sub(announced) < notice:
			t.Fatalf("trial %d, %s: window %v announced at %v, less than the notice %v before", n, pl.Key, w, announced, notice)
		case counts[w.Start] > s.MaxPerSlot:
			t.Fatalf("trial %d: slot %v holds more than %d", n, w.Start, s.MaxPerSlot)
		case s.MaxPerSubscription > 0 && subCounts[campaign.SubscriptionKey(pl.Key)+w.Start.String()] > s.MaxPerSubscription:
			t.Fatalf("trial %d: slot %v holds more than %d of %s", n, w.Start, s.MaxPerSubscription, campaign.SubscriptionKey(pl.Key))
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func TestPlan_IsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		tr := randomTrial(t, r)
		var a, b bytes.Buffer
		if err := campaign.NewPlan(tr.spec, tr.sel, tr.pols, tr.set, tr.now).WriteJSON(&a, true); err != nil {
			t.Fatal(err)
		}
		shuffled := append(campaign.Selection(nil), tr.sel...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		subs, _ := campaignspec.ParsePrefix("/subscriptions")
		tenants, _ := campaignspec.ParsePrefix("/tenants")
		again, err := campaign.Select(nil, []campaignspec.Prefix{subs, tenants}, func(yield func(string, string) bool) {
			for _, e := range shuffled {
				if !yield(e.Key, e.ResourceID) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := campaign.NewPlan(tr.spec, again, tr.pols, tr.set, tr.now).WriteJSON(&b, true); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("the same spec, entities, policies and time planned twice differ:\n%s\n%s", a.Bytes(), b.Bytes())
		}
	}
}
