package web

import (
	"fmt"
	"testing"
	"time"

	"maintsignals/shared/domain"
)

// BenchmarkIndex_FleetPage is the fleet page's work (counts, time line, first page) at 200,000
// entities in 100 subscriptions, for the operator and for a customer holding one subscription:
// a customer's counts are a walk over its own entities, so its page costs what its share does.
func BenchmarkIndex_FleetPage(b *testing.B) {
	x := newIndex(time.Hour)
	x.mu.Lock()
	for i := range 200_000 {
		r := domain.Record{State: domain.States[i%len(domain.States)], ResourceID: rid(fmt.Sprintf("s%03d", i%100), "rg", fmt.Sprintf("c%06d", i))}
		if r.State == domain.StatePending {
			r.Window = window(t0.Add(time.Duration(i%(14*24))*time.Hour), time.Hour)
		}
		x.put(domain.MustKey(r.ResourceID), 1, r)
	}
	x.mu.Unlock()
	for _, tc := range []struct {
		name   string
		viewer *Customer
	}{
		{"operator", nil},
		{"customer of one subscription in 100", newCustomer("c", []domain.Scope{mustScope(b, "/subscriptions/s042")})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				x.stats(t0, tc.viewer)
				x.timeline(t0, 14, tc.viewer)
				x.page(Query{Viewer: tc.viewer, Limit: 50}, t0)
			}
		})
	}
}

func mustScope(tb testing.TB, s string) domain.Scope {
	tb.Helper()
	sc, err := domain.ParseScope(s)
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}
