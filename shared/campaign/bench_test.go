package campaign_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// A fleet as the contract's spectest.Example plans it: the spectest.Example spec (4h windows on 15m slots from
// 15 December, preferred across 14 days, deadline 15 January, 500 a slot, 20 a subscription),
// n entities, 100 per subscription, a tenth of the subscriptions under one of a few policies.

func fleetIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		sub := i / 100
		ids[i] = fmt.Sprintf("/subscriptions/%08x-1bf0-4dda-aec3-5d1e7a0c%04x/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d",
			sub*2654435761%(1<<32), sub%65536, i%7, i)
	}
	return ids
}

func fleetPolicies(b testing.TB, n int) campaign.Policies { return fleetPoliciesEvery(b, n, 10) }

// fleetPoliciesEvery puts one subscription in every under a policy.
func fleetPoliciesEvery(b testing.TB, n, every int) campaign.Policies {
	var pols []*policy.Policy
	for i, w := range []policy.Window{
		{RRule: "FREQ=DAILY", Start: "22:00", Duration: "6h"},
		{RRule: "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", Start: "20:00", Duration: "8h"},
		{RRule: "FREQ=WEEKLY;BYDAY=SA,SU", Start: "00:00", Duration: "24h"},
		{RRule: "FREQ=DAILY", Start: "01:00", Duration: "5h"},
	} {
		for j, tz := range []string{"Europe/Berlin", "America/New_York", "Asia/Tokyo"} {
			pols = append(pols, compilePolicy(b, policy.Document{Scope: fmt.Sprintf("/subscriptions/p%d-%d", i, j), TimeZone: tz,
				Windows: []policy.Window{w}, Blackouts: []policy.Blackout{{Start: "2026-12-24", End: "2026-12-27"}}}))
		}
	}
	bySub := map[string]*policy.Policy{} // a tenth of the subscriptions, as a store's cache would hold them
	for i, id := range fleetIDs(n) {
		if i%100 == 0 && (i/100)%every == every/3 {
			bySub[campaign.SubscriptionKey(domainKey(id))] = pols[(i/1000)%len(pols)]
		}
	}
	return func(key string) *policy.Policy { return bySub[campaign.SubscriptionKey(key)] }
}

func fleet(b *testing.B, n int) (*campaignspec.Spec, campaign.Selection, campaign.Policies) {
	b.Helper()
	l, err := campaign.ParseList(strings.NewReader(strings.Join(fleetIDs(n), "\n")))
	if err != nil {
		b.Fatal(err)
	}
	return spectest.MustSpec(b, []byte(spectest.Example)), l.Entries, fleetPolicies(b, n)
}

var planAt = spectest.UTC("2026-11-20T00:00:00Z")

func benchmarkPlan(b *testing.B, n, every int) {
	s, sel, _ := fleet(b, n)
	pols := fleetPoliciesEvery(b, n, every)
	b.ReportAllocs()
	b.ResetTimer()
	var p *campaign.Plan
	for b.Loop() {
		p = campaign.NewPlan(s, sel, pols, campaign.Settings{}, planAt)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entities/s")
	b.ReportMetric(float64(p.Planned()), "planned")
	b.ReportMetric(float64(len(p.Slots())), "slots")
}

func BenchmarkPlan_100k(b *testing.B) { benchmarkPlan(b, 100_000, 10) }
func BenchmarkPlan_1M(b *testing.B)   { benchmarkPlan(b, 1_000_000, 10) }

// BenchmarkPlan_1M_AllUnderPolicies: every subscription under one of the policies, which
// leave a quarter to a third of the slots allowed.
func BenchmarkPlan_1M_AllUnderPolicies(b *testing.B) { benchmarkPlan(b, 1_000_000, 1) }

// BenchmarkDryRun_1M is what `campaign create --dry-run --plan -o json` does after reading its
// list: select, plan and write every entity's window.
func BenchmarkDryRun_1M(b *testing.B) {
	s, sel, pols := fleet(b, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := campaign.NewPlan(s, sel, pols, campaign.Settings{}, planAt)
		if err := p.WriteJSON(io.Discard, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseList_1M reads a list file of a million resource IDs (about 130 MB).
func BenchmarkParseList_1M(b *testing.B) {
	body := []byte(strings.Join(fleetIDs(1_000_000), "\n"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := campaign.ParseList(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}

func domainKey(id string) string { return domain.MustKey(id) }
