package policy_test

import (
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// A planner asks once per entity, at starts spread over weeks: the queries step through
// 60 days, 37 minutes at a time, on a policy compiled once (its years of occurrences cached).

var benchFrom = utc("2026-11-01T00:00:00Z")

func spread(i int) time.Time { return benchFrom.Add(time.Duration(i%2335) * 37 * time.Minute) }

func BenchmarkNextAllowed(b *testing.B) {
	p := customer(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := p.NextAllowed(4*time.Hour, spread(i)); !ok {
			b.Fatal("no allowed start")
		}
	}
}

func BenchmarkNextAllowed_NoWindows(b *testing.B) {
	p := compile(b, `, "blackouts": [`+blackout("2026-12-20", "2027-01-04")+`]`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.NextAllowed(4*time.Hour, spread(i))
	}
}

func BenchmarkNextAllowedAligned(b *testing.B) {
	p := customer(b)
	origin := utc("2026-11-01T00:00:00Z")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.NextAllowedAligned(4*time.Hour, spread(i), origin, 15*time.Minute)
	}
}

func BenchmarkAllows(b *testing.B) {
	p := customer(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := spread(i)
		p.Allows(domain.Window{Start: s, End: s.Add(4 * time.Hour)})
	}
}

func BenchmarkEnforce_Pending(b *testing.B) {
	p := customer(b)
	stored := utc("2026-10-01T00:00:00Z")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := spread(i)
		policy.Enforce(pending(domain.Window{Start: s, End: s.Add(4 * time.Hour)}), stored, p, 0)
	}
}

// BenchmarkCompileAndFirstQuery is what a policy costs before its cache is warm: what a
// command function pays once per policy revision, and a planner once per distinct policy.
func BenchmarkCompileAndFirstQuery(b *testing.B) {
	body := []byte(`{"scope": "` + scope + `", "timeZone": "Europe/Berlin",
	 "windows": [{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}],
	 "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}], "minNotice": "336h"}`)
	for i := 0; i < b.N; i++ {
		p, err := policy.ParseStored(body)
		if err != nil {
			b.Fatal(err)
		}
		p.NextAllowed(4*time.Hour, spread(i))
	}
}

// BenchmarkParse is setting a policy: reading it and the 48/32 rule over a year.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"scope": "` + scope + `", "timeZone": "Europe/Berlin",
	 "windows": [{"rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "start": "22:00", "duration": "6h"}],
	 "blackouts": [{"start": "2026-12-20", "end": "2027-01-04", "reason": "holiday freeze"}], "minNotice": "336h"}`)
	for i := 0; i < b.N; i++ {
		if _, rej := policy.Parse(body, setAt); rej != nil {
			b.Fatal(rej)
		}
	}
}
