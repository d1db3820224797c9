package web

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/policy"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func rid(sub, rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s", sub, rg, name)
}

func put(x *index, id string, r domain.Record) string {
	key := domain.MustKey(id)
	r.ResourceID = id
	x.mu.Lock()
	defer x.mu.Unlock()
	x.put(key, 1, r)
	return key
}

func window(start time.Time, d time.Duration) *domain.Window {
	return &domain.Window{Start: start, End: start.Add(d)}
}

func TestDisplayOf_GivesBackTheResourceIDAsFirstSeen(t *testing.T) {
	for _, id := range []string{
		rid("0b1f6471-1bf0-4dda-aec3-5d1e7a0c0001", "rg-1", "c1"),
		"/subscriptions/s/resourcegroups/rg/providers/x/y/c1", // the key decoded: nothing kept
		"subscriptions/no-leading-slash",
		"/Ünïcode/Cluster",
		"/a=b/C.D",
		"/ALLCAPS/RESOURCE",
	} {
		key := domain.MustKey(id)
		e := entry{key: key, disp: displayOf(key, id)}
		if got := e.resourceID(); got != id {
			t.Errorf("%q: kept %q, gives back %q", id, e.disp, got)
		}
		if len(e.disp) > len(id)/4+2 && e.disp[0] != dispFull {
			t.Errorf("%q: %d bytes kept", id, len(e.disp))
		}
	}
	e := entry{key: "subscriptions/x", disp: displayOf("subscriptions/x", "")}
	if got := e.resourceID(); got != "/subscriptions/x" {
		t.Errorf("a record without resourceId shows %q", got)
	}
}

func TestIndex_CountsFollowEveryChange(t *testing.T) {
	x := newIndex(6 * time.Hour)
	a := put(x, rid("s1", "rg", "a"), domain.Record{State: domain.StatePending, Window: window(t0.Add(-2*time.Hour), time.Hour)})
	put(x, rid("s1", "rg", "b"), domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, UpdatedAt: t0.Add(-7 * time.Hour)})
	put(x, rid("s2", "rg", "c"), domain.Record{State: domain.StatePending, Window: window(t0.Add(time.Hour), time.Hour)})
	put(x, rid("s2", "rg", "d"), domain.Record{State: domain.StateUnplanned, Updating: true, UpdatedAt: t0.Add(-time.Hour)})

	s := x.stats(t0, nil)
	want := Stats{Entities: 4, States: map[domain.State]int{domain.StateNone: 0, domain.StatePending: 2, domain.StatePlanned: 1, domain.StateUnplanned: 1, domain.StateCustomerActionNeeded: 0},
		Updating: 2, Overdue: 1, Stuck: 1}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
	// a moves to None: no longer overdue, no longer Pending.
	put(x, rid("s1", "rg", "a"), domain.Record{State: domain.StateNone})
	if s := x.stats(t0, nil); s.Overdue != 0 || s.States[domain.StatePending] != 1 || s.States[domain.StateNone] != 1 || s.Entities != 4 {
		t.Errorf("after a change: %+v", s)
	}
	x.mu.Lock()
	x.remove(a)
	x.mu.Unlock()
	if s := x.stats(t0, nil); s.Entities != 3 || s.States[domain.StateNone] != 0 {
		t.Errorf("after a delete: %+v", s)
	}
	// A forgotten entity leaves the fleet as a deleted one does.
	put(x, rid("s1", "rg", "b"), domain.Record{State: domain.StateNone, ForgottenAt: t0})
	if s := x.stats(t0, nil); s.Entities != 2 || s.States[domain.StatePlanned] != 0 || s.States[domain.StateNone] != 0 {
		t.Errorf("after a forget: %+v", s)
	}
	// Time passing makes c overdue and d stuck without any change.
	if s := x.stats(t0.Add(6*time.Hour+time.Second), nil); s.Overdue != 1 || s.Stuck != 1 {
		t.Errorf("six hours later: %+v", s)
	}
}

func TestIndex_PagesFilterByStateAndPrefixInKeyOrder(t *testing.T) {
	x := newIndex(time.Hour)
	var pending []string
	for i := range 30 {
		st := domain.StateNone
		if i%3 == 0 {
			st = domain.StatePending
		}
		sub := "s1"
		if i >= 20 {
			sub = "s2"
		}
		k := put(x, rid(sub, "rg", fmt.Sprintf("c%02d", i)), domain.Record{State: st})
		if st == domain.StatePending && sub == "s1" {
			pending = append(pending, k)
		}
	}
	prefix := domain.MustKey("/subscriptions/s1")
	var got []string
	q := Query{State: domain.StatePending, Prefix: prefix, Limit: 3}
	for range 10 {
		p := x.page(q, t0)
		if p.Matches != len(pending) {
			t.Fatalf("matches %d, want %d", p.Matches, len(pending))
		}
		for _, r := range p.Rows {
			got = append(got, r.Key)
			if r.State != domain.StatePending || r.ResourceID != rid("s1", "rg", r.ResourceID[len(r.ResourceID)-3:]) {
				t.Errorf("row %+v", r)
			}
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if !slices.Equal(got, pending) {
		t.Errorf("pages gave %v, want %v", got, pending)
	}
	// Back from the last page.
	last := x.page(Query{State: domain.StatePending, Prefix: prefix, After: pending[3], Limit: 3}, t0)
	if last.Prev != pending[4] || last.Next != "" {
		t.Fatalf("last page: prev %q next %q", last.Prev, last.Next)
	}
	back := x.page(Query{State: domain.StatePending, Prefix: prefix, Before: last.Prev, Limit: 3}, t0)
	if keys := rowKeys(back.Rows); !slices.Equal(keys, pending[1:4]) || back.Prev != pending[1] || back.Next != pending[3] {
		t.Errorf("page before: %v prev %q next %q", keys, back.Prev, back.Next)
	}
	first := x.page(Query{State: domain.StatePending, Prefix: prefix, Before: pending[3], Limit: 3}, t0)
	if keys := rowKeys(first.Rows); !slices.Equal(keys, pending[:3]) || first.Prev != "" {
		t.Errorf("first page, reached back: %v prev %q", keys, first.Prev)
	}
	if all := x.page(Query{Limit: 100}, t0); all.Matches != 30 || len(all.Rows) != 30 || !slices.IsSortedFunc(all.Rows, func(a, b fleet.Record) int { return cmpStr(a.Key, b.Key) }) {
		t.Errorf("unfiltered: %d of %d", len(all.Rows), all.Matches)
	}
}

func rowKeys(rows []fleet.Record) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestIndex_TimelineCountsWindowsByDayAndNamesTheFirst(t *testing.T) {
	x := newIndex(time.Hour)
	day3 := t0.Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	for i := range 7 {
		put(x, rid("s", "rg", fmt.Sprintf("c%d", i)), domain.Record{State: domain.StatePending, Window: window(day3.Add(time.Duration(i)*time.Hour), time.Hour)})
	}
	put(x, rid("s", "rg", "late"), domain.Record{State: domain.StatePending, Window: window(day3.Add(23*time.Hour+59*time.Minute), time.Hour)})
	put(x, rid("s", "rg", "past"), domain.Record{State: domain.StatePending, Window: window(t0.Add(-48*time.Hour), time.Hour)})
	put(x, rid("s", "rg", "far"), domain.Record{State: domain.StatePending, Window: window(t0.Add(20*24*time.Hour), time.Hour)})
	days := x.timeline(t0, 14, nil)
	if len(days) != 14 || days[0].Date != "2026-12-01" || days[3].Date != "2026-12-04" {
		t.Fatalf("days %v", days)
	}
	for i, d := range days {
		want := 0
		if i == 3 {
			want = 8
		}
		if d.Windows != want {
			t.Errorf("%s: %d windows, want %d", d.Date, d.Windows, want)
		}
	}
	if f := days[3].First; len(f) != timelineSample || shortName(f[0].ResourceID) != "c0" || shortName(f[4].ResourceID) != "c4" {
		t.Errorf("first of the day: %v", f)
	}
}

func TestIndex_ConflictsFollowThePolicyInForce(t *testing.T) {
	x := newIndex(time.Hour)
	// A window on a Tuesday night, 23:00–01:00 UTC.
	w := window(time.Date(2026, 12, 15, 23, 0, 0, 0, time.UTC), 2*time.Hour)
	a := put(x, rid("s1", "rg1", "a"), domain.Record{State: domain.StatePending, Window: w})
	put(x, rid("s1", "rg2", "b"), domain.Record{State: domain.StatePending, Window: w})
	put(x, rid("s2", "rg1", "c"), domain.Record{State: domain.StatePending, Window: w})
	weekends := mustPolicy(t, `{"scope":"/subscriptions/s1","windows":[{"rrule":"FREQ=WEEKLY;BYDAY=SA,SU","start":"00:00","duration":"24h"}]}`)
	x.setPolicy(weekends.Scope().Key, &fleet.InForce{Policy: weekends, Since: t0})
	if s := x.stats(t0, nil); s.Conflicts != 2 {
		t.Fatalf("under a weekend-only policy: %d conflicts, want 2", s.Conflicts)
	}
	// A more specific policy that allows it wins for rg1 alone.
	any := mustPolicy(t, `{"scope":"/subscriptions/s1/resourceGroups/rg1"}`)
	x.setPolicy(any.Scope().Key, &fleet.InForce{Policy: any, Since: t0})
	if s := x.stats(t0, nil); s.Conflicts != 1 {
		t.Errorf("with rg1 open: %d conflicts, want 1", s.Conflicts)
	}
	if p := x.inForce(a).Policy; p != any {
		t.Errorf("policy of a: %v", p)
	}
	// A change of the record ends its conflict; deleting the policy ends the other.
	put(x, rid("s1", "rg2", "b"), domain.Record{State: domain.StateNone})
	x.setPolicy(weekends.Scope().Key, nil)
	if s := x.stats(t0, nil); s.Conflicts != 0 {
		t.Errorf("at the end: %d conflicts", s.Conflicts)
	}
}

func mustPolicy(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.ParseStored([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestIndex_APrefixEndsAtAPathSegment(t *testing.T) {
	x := newIndex(time.Hour)
	for _, rg := range []string{"rg-1", "rg-10", "rg-1-old", "rg-2"} {
		for _, c := range []string{"a", "b"} {
			put(x, rid("s", rg, c), domain.Record{State: domain.StateNone})
		}
	}
	rg1 := put(x, "/subscriptions/s/resourceGroups/RG-1", domain.Record{State: domain.StateNone}) // the group itself
	for _, tc := range []struct {
		name   string
		prefix string
		want   []string
	}{
		{"a resource group selects itself and what lies under it, not rg-10", "/subscriptions/s/resourceGroups/rg-1",
			[]string{rg1, domain.MustKey(rid("s", "rg-1", "a")), domain.MustKey(rid("s", "rg-1", "b"))}},
		{"in any casing, with a trailing slash", "/SUBSCRIPTIONS/s/resourcegroups/RG-1/",
			[]string{rg1, domain.MustKey(rid("s", "rg-1", "a")), domain.MustKey(rid("s", "rg-1", "b"))}},
		{"a prefix that ends inside a segment selects nothing", "/subscriptions/s/resourceGroups/rg", nil},
		{"a whole resource ID selects that entity", rid("s", "rg-10", "b"), []string{domain.MustKey(rid("s", "rg-10", "b"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := domain.ParsePrefixLoose(tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			// One row a page, forwards then backwards: every way through the table agrees.
			var fwd []string
			q := Query{Prefix: p.Key, Limit: 1}
			for {
				pg := x.page(q, t0)
				if pg.Matches != len(tc.want) {
					t.Fatalf("matches %d, want %d", pg.Matches, len(tc.want))
				}
				fwd = append(fwd, rowKeys(pg.Rows)...)
				if pg.Next == "" {
					break
				}
				q.After = pg.Next
			}
			if !slices.Equal(fwd, tc.want) {
				t.Fatalf("pages forwards: %v, want %v", fwd, tc.want)
			}
			if len(tc.want) < 2 {
				return
			}
			back := x.page(Query{Prefix: p.Key, Before: tc.want[len(tc.want)-1], Limit: 10}, t0)
			if got := rowKeys(back.Rows); !slices.Equal(got, tc.want[:len(tc.want)-1]) || back.Prev != "" {
				t.Errorf("page before the last: %v (prev %q), want %v", got, back.Prev, tc.want[:len(tc.want)-1])
			}
			second := x.page(Query{Prefix: p.Key, After: tc.want[0], Limit: 10}, t0)
			if second.Prev != tc.want[1] {
				t.Errorf("page after the first: prev %q, want %q", second.Prev, tc.want[1])
			}
		})
	}
}

func TestIndex_ConflictIsTheNoticesRule(t *testing.T) {
	weekends := mustPolicy(t, `{"scope":"/subscriptions/s1","windows":[{"rrule":"FREQ=WEEKLY;BYDAY=SA,SU","start":"00:00","duration":"24h"}]}`)
	tuesday := window(time.Date(2026, 12, 15, 23, 0, 0, 0, time.UTC), 2*time.Hour)
	for _, tc := range []struct {
		name string
		rec  domain.Record
		at   time.Time
		want int
	}{
		{"a window announced before the policy conflicts", domain.Record{State: domain.StatePending, Window: tuesday, LastCommandAt: t0.Add(-time.Hour)}, t0, 1},
		{"a window announced after the policy was judged by it: none", domain.Record{State: domain.StatePending, Window: tuesday, LastCommandAt: t0.Add(time.Hour)}, t0, 0},
		{"a window that has ended conflicts no more", domain.Record{State: domain.StatePending, Window: tuesday, LastCommandAt: t0.Add(-time.Hour)}, tuesday.End, 0},
		{"a moment before its end it still does", domain.Record{State: domain.StatePending, Window: tuesday, LastCommandAt: t0.Add(-time.Hour)}, tuesday.End.Add(-time.Nanosecond), 1},
		{"Planned with the same window: none", domain.Record{State: domain.StatePlanned, Window: tuesday, LastCommandAt: t0.Add(-time.Hour)}, t0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex(time.Hour)
			x.setPolicy(weekends.Scope().Key, &fleet.InForce{Policy: weekends, Since: t0})
			key := put(x, rid("s1", "rg", "a"), tc.rec)
			want := policy.Conflict(tc.rec, weekends, t0, tc.at) != ""
			if got := x.stats(tc.at, nil).Conflicts; got != tc.want || (got == 1) != want {
				t.Errorf("the index counts %d conflicts, want %d (policy.Conflict: %v)", got, tc.want, want)
			}
			x.mu.RLock()
			e, _ := x.all.Get(&entry{key: key})
			row := x.row(e, tc.at)
			x.mu.RUnlock()
			if row.Conflict != (tc.want == 1) {
				t.Errorf("the row says conflict %v", row.Conflict)
			}
		})
	}
}

func TestIndex_OverdueAndStuckCountsAreTheRecordsOwnAtEveryInstant(t *testing.T) {
	const limit = 6 * time.Hour
	end := t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		rec  domain.Record
		at   time.Time
	}{
		{"Pending a moment before the window ends", domain.Record{State: domain.StatePending, Window: window(t0, time.Hour)}, end.Add(-time.Nanosecond)},
		{"Pending as the window ends", domain.Record{State: domain.StatePending, Window: window(t0, time.Hour)}, end},
		{"Planned after the window", domain.Record{State: domain.StatePlanned, Window: window(t0, time.Hour)}, end.Add(time.Hour)},
		{"updating exactly the limit", domain.Record{Updating: true, UpdatedAt: t0}, t0.Add(limit)},
		{"updating a moment past the limit", domain.Record{Updating: true, UpdatedAt: t0}, t0.Add(limit + time.Nanosecond)},
		{"updating since an unknown time", domain.Record{Updating: true}, t0.Add(limit * 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex(limit)
			put(x, rid("s", "rg", "a"), tc.rec)
			s := x.stats(tc.at, nil)
			if want := tc.rec.Overdue(tc.at); (s.Overdue == 1) != want {
				t.Errorf("overdue count %d, the record says %v", s.Overdue, want)
			}
			if want := tc.rec.Stuck(tc.at, limit); (s.Stuck == 1) != want {
				t.Errorf("stuck count %d, the record says %v", s.Stuck, want)
			}
			if rows := x.page(Query{Limit: 1}, tc.at).Rows; rows[0].Overdue != tc.rec.Overdue(tc.at) || rows[0].Stuck != tc.rec.Stuck(tc.at, limit) {
				t.Errorf("row %+v", rows[0])
			}
		})
	}
}

// customer is a customer token's holder with the scopes given.
func customer(t *testing.T, name string, scopes ...string) *Customer {
	t.Helper()
	var ss []domain.Scope
	for _, s := range scopes {
		sc, err := domain.ParseScope(s)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, sc)
	}
	return newCustomer(name, ss)
}

// tenantsFleet is a fleet of three subscriptions whose names start alike (s1, s1-x, s10) and
// two resource groups in s1, with every fact the fleet page counts somewhere.
func tenantsFleet() *index {
	x := newIndex(time.Hour)
	day2 := t0.Truncate(24 * time.Hour).Add(2 * 24 * time.Hour)
	put(x, rid("s1", "rg-a", "a1"), domain.Record{State: domain.StatePending, Window: window(t0.Add(-3*time.Hour), time.Hour)}) // overdue
	put(x, rid("s1", "rg-a", "a2"), domain.Record{State: domain.StatePending, Window: window(day2.Add(time.Hour), time.Hour)})
	put(x, rid("s1", "rg-a", "a3"), domain.Record{State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything, UpdatedAt: t0.Add(-2 * time.Hour)}) // stuck
	put(x, rid("s1", "rg-b", "b1"), domain.Record{State: domain.StatePending, Window: window(day2.Add(2*time.Hour), time.Hour)})
	put(x, rid("s1", "rg-b", "b2"), domain.Record{State: domain.StateNone})
	put(x, rid("s1-x", "rg-a", "x1"), domain.Record{State: domain.StatePending, Window: window(day2, time.Hour)})
	put(x, rid("s1-x", "rg-a", "x2"), domain.Record{State: domain.StateUnplanned, Updating: true, UpdatedAt: t0.Add(-3 * time.Hour)})
	put(x, rid("s10", "rg-a", "t1"), domain.Record{State: domain.StateCustomerActionNeeded})
	put(x, rid("s10", "rg-a", "t2"), domain.Record{State: domain.StatePending, Window: window(t0.Add(-5*time.Hour), time.Hour)})
	return x
}

func TestIndex_ACustomerCountsAndListsOnlyTheEntitiesOfItsScopes(t *testing.T) {
	x := tenantsFleet()
	// A weekend-only policy on s1 puts its Tuesday-night windows in conflict; none in s1-x.
	weekends := mustPolicy(t, `{"scope":"/subscriptions/s1","windows":[{"rrule":"FREQ=WEEKLY;BYDAY=SA,SU","start":"00:00","duration":"24h"}]}`)
	x.setPolicy(weekends.Scope().Key, &fleet.InForce{Policy: weekends, Since: t0.Add(time.Minute)})
	for _, tc := range []struct {
		name      string
		viewer    *Customer
		want      []string // the entities' names, in key order
		states    map[domain.State]int
		updating  int
		overdue   int
		stuck     int
		conflicts int
		windows   int // starting on day 2 of the time line
	}{
		{"the operator sees the fleet", nil,
			[]string{"x1", "x2", "a1", "a2", "a3", "b1", "b2", "t1", "t2"}, // s1-x sorts before s1/
			map[domain.State]int{domain.StateNone: 1, domain.StatePending: 5, domain.StatePlanned: 1, domain.StateUnplanned: 1, domain.StateCustomerActionNeeded: 1},
			2, 2, 2, 2, 3},
		{"a subscription sees its own, not s1-x's nor s10's", customer(t, "s1", "/subscriptions/s1"),
			[]string{"a1", "a2", "a3", "b1", "b2"},
			map[domain.State]int{domain.StateNone: 1, domain.StatePending: 3, domain.StatePlanned: 1},
			1, 1, 1, 2, 2},
		{"a resource group sees that group only", customer(t, "rg-b", "/subscriptions/s1/resourceGroups/RG-B"),
			[]string{"b1", "b2"},
			map[domain.State]int{domain.StateNone: 1, domain.StatePending: 1},
			0, 0, 0, 1, 1},
		{"several scopes see their union, once", customer(t, "two", "/subscriptions/s10", "/subscriptions/s1/resourceGroups/rg-a", "/subscriptions/s1"),
			[]string{"a1", "a2", "a3", "b1", "b2", "t1", "t2"},
			map[domain.State]int{domain.StateNone: 1, domain.StatePending: 4, domain.StatePlanned: 1, domain.StateCustomerActionNeeded: 1},
			1, 2, 1, 2, 2},
		{"a subscription with no entity sees none", customer(t, "empty", "/subscriptions/s2"),
			nil, map[domain.State]int{}, 0, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := x.stats(t0, tc.viewer)
			want := Stats{Entities: len(tc.want), States: map[domain.State]int{}, Updating: tc.updating, Overdue: tc.overdue, Stuck: tc.stuck, Conflicts: tc.conflicts}
			for _, st := range domain.States {
				want.States[st] = tc.states[st]
			}
			if fmt.Sprint(s) != fmt.Sprint(want) {
				t.Errorf("stats %+v, want %+v", s, want)
			}
			if tc.viewer == nil {
				// The walk that counts a customer's entities counts the fleet as the index does.
				if w := x.statsWithin(t0, spansOf([]string{""})); fmt.Sprint(w) != fmt.Sprint(s) {
					t.Errorf("counted by a walk: %+v, by the index: %+v", w, s)
				}
			}
			p := x.page(Query{Viewer: tc.viewer, Limit: 100}, t0)
			if got := names(p.Rows); !slices.Equal(got, tc.want) || p.Matches != len(tc.want) {
				t.Errorf("table %v (%d matches), want %v", got, p.Matches, tc.want)
			}
			days := x.timeline(t0, 14, tc.viewer)
			if days[2].Windows != tc.windows || len(days[2].First) != tc.windows {
				t.Errorf("day 2: %d windows, %d named, want %d", days[2].Windows, len(days[2].First), tc.windows)
			}
			for i, d := range days {
				if want := t0.Truncate(24 * time.Hour).Add(time.Duration(i) * 24 * time.Hour).Format(time.DateOnly); d.Date != want {
					t.Errorf("day %d is %s, want %s", i, d.Date, want)
				}
				for _, r := range d.First {
					if !tc.viewer.Covers(r.Key) {
						t.Errorf("the time line names %s", r.ResourceID)
					}
				}
			}
		})
	}
}

func TestIndex_ACustomersFilterNarrowsItsScopesNeverWidensThem(t *testing.T) {
	x := tenantsFleet()
	s1 := customer(t, "s1", "/subscriptions/s1")
	for _, tc := range []struct {
		name   string
		viewer *Customer
		state  domain.State
		prefix string
		want   []string
	}{
		{"a prefix inside its scope", s1, "", "/subscriptions/s1/resourceGroups/rg-b", []string{"b1", "b2"}},
		{"a prefix around its scope shows its scope", s1, "", "/subscriptions", []string{"a1", "a2", "a3", "b1", "b2"}},
		{"another tenant's prefix shows nothing", s1, "", "/subscriptions/s1-x", nil},
		{"another tenant's entity shows nothing", s1, "", rid("s10", "rg-a", "t1"), nil},
		{"a state within its scope", s1, domain.StatePending, "", []string{"a1", "a2", "b1"}},
		{"a state it has none of", s1, domain.StateCustomerActionNeeded, "", nil},
		{"a group and the other's subscription: the group", customer(t, "mixed", "/subscriptions/s1/resourceGroups/rg-a", "/subscriptions/s10"), domain.StatePending, "/subscriptions", []string{"a1", "a2", "t2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prefix string
			if tc.prefix != "" {
				p, err := domain.ParsePrefixLoose(tc.prefix)
				if err != nil {
					t.Fatal(err)
				}
				prefix = p.Key
			}
			// One row a page forwards, then back from the end: every way through agrees.
			var fwd []fleet.Record
			q := Query{Viewer: tc.viewer, State: tc.state, Prefix: prefix, Limit: 1}
			for range 20 {
				p := x.page(q, t0)
				if p.Matches != len(tc.want) {
					t.Fatalf("matches %d, want %d", p.Matches, len(tc.want))
				}
				fwd = append(fwd, p.Rows...)
				if p.Next == "" {
					break
				}
				q.After = p.Next
			}
			if got := names(fwd); !slices.Equal(got, tc.want) {
				t.Fatalf("pages forwards %v, want %v", got, tc.want)
			}
			if len(fwd) < 2 {
				return
			}
			last := fwd[len(fwd)-1].Key
			back := x.page(Query{Viewer: tc.viewer, State: tc.state, Prefix: prefix, Before: last, Limit: 100}, t0)
			if got := names(back.Rows); !slices.Equal(got, tc.want[:len(tc.want)-1]) || back.Prev != "" || back.Next != fwd[len(fwd)-2].Key {
				t.Errorf("the page before the last: %v (prev %q, next %q)", got, back.Prev, back.Next)
			}
			second := x.page(Query{Viewer: tc.viewer, State: tc.state, Prefix: prefix, After: fwd[0].Key, Limit: 1}, t0)
			if second.Prev != fwd[1].Key {
				t.Errorf("the page after the first: prev %q, want %q", second.Prev, fwd[1].Key)
			}
		})
	}
}

// names are the rows' entity names (the last segment of their resource IDs).
func names(rows []fleet.Record) []string {
	var out []string
	for _, r := range rows {
		out = append(out, shortName(r.ResourceID))
	}
	return out
}

func TestIndex_ACustomersTimeLineNamesItsEarliestWindowsAsTheFleetsDoes(t *testing.T) {
	x, alone := newIndex(time.Hour), newIndex(time.Hour)
	day3 := t0.Truncate(24 * time.Hour).Add(3 * 24 * time.Hour)
	// Starts out of key order, two sharing an instant, and another tenant's earlier ones.
	for i, h := range []int{9, 3, 7, 3, 1, 12, 5, 8} {
		r := domain.Record{State: domain.StatePending, Window: window(day3.Add(time.Duration(h)*time.Hour), time.Hour)}
		put(x, rid("s1", "rg", fmt.Sprintf("c%d", i)), r)
		put(alone, rid("s1", "rg", fmt.Sprintf("c%d", i)), r)
		put(x, rid("s2", "rg", fmt.Sprintf("c%d", i)), domain.Record{State: domain.StatePending, Window: window(day3, time.Hour)})
	}
	got := x.timeline(t0, 14, customer(t, "s1", "/subscriptions/s1"))[3]
	want := alone.timeline(t0, 14, nil)[3]
	if got.Windows != 8 || !slices.Equal(names(got.First), names(want.First)) || len(got.First) != timelineSample {
		t.Errorf("the customer's day: %d windows, first %v; the fleet of s1 alone: %d, first %v", got.Windows, names(got.First), want.Windows, names(want.First))
	}
}
