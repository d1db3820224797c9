package domain_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"maintsignals/shared/domain"
)

func TestTenantOf(t *testing.T) {
	for _, tc := range []struct{ id, sub, group string }{
		{"/subscriptions/S1/resourceGroups/RG-1/providers/x/y/c1", "s1", "rg-1"},
		{"/subscriptions/s1/resourceGroups/rg1", "s1", "rg1"},
		{"/subscriptions/s1", "s1", "_"},
		{"/subscriptions/s1/providers/x", "s1", "_"},
		{"/subscriptions/s1/resourceGroups//x", "s1", "_"},
		{"/subscriptions//resourceGroups/rg", "_", "_"},
		{"/tenants/t1/clusters/c1", "_", "_"},
		{"/subscriptions/a.b/resourceGroups/c d/x", "a=2eb", "c=20d"},
	} {
		got := domain.TenantOf(domain.MustKey(tc.id))
		if got.Subscription != tc.sub || got.Group != tc.group {
			t.Errorf("TenantOf(%s) = %+v, want %s %s", tc.id, got, tc.sub, tc.group)
		}
	}
}

func TestLocated_EndsWithTheKeyAsOneToken(t *testing.T) {
	key := domain.MustKey("/subscriptions/s1/resourceGroups/rg1/providers/p/c/x.y")
	if got, want := domain.Located(key), "s1.rg1."+key; got != want {
		t.Fatalf("Located = %q, want %q", got, want)
	}
	if got := domain.KeyFromSubject(domain.EventSubject(key)); got != key {
		t.Fatalf("key of the event subject = %q, want %q", got, key)
	}
	c := domain.CellOf(key)
	if got, want := domain.RecordSubject(key), "$KV."+c.RecordsBucket()+".s1.rg1."+key; got != want {
		t.Fatalf("RecordSubject = %q, want %q", got, want)
	}
	if got, want := domain.NoticeSubject(key), "maint.notice."+c.String()+".s1.rg1."+key; got != want {
		t.Fatalf("NoticeSubject = %q, want %q", got, want)
	}
}

// A shard of any count that divides Cells reads exactly the cells of its keys.
func TestShardCells_HoldTheShardsKeys(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		seen := map[domain.Cell]int{}
		for i := range n {
			s := domain.Shard{Index: i, Of: n}
			for _, c := range s.Cells() {
				seen[c]++
			}
			for k := range 200 {
				key := domain.MustKey("/subscriptions/s/resourceGroups/rg/x/c" + string(rune('a'+k%26)) + string(rune('a'+k/26)))
				holds := s.Holds(key)
				inCells := false
				for _, c := range s.Cells() {
					inCells = inCells || c == domain.CellOf(key)
				}
				if holds != inCells {
					t.Fatalf("shard %d/%d: key %s holds=%v but its cell %d in the shard's cells=%v", i, n, key, holds, domain.CellOf(key), inCells)
				}
			}
		}
		if len(seen) != domain.Cells {
			t.Fatalf("%d shards cover %d cells, want %d", n, len(seen), domain.Cells)
		}
		for c, k := range seen {
			if k != 1 {
				t.Fatalf("%d shards: cell %d read by %d shards", n, c, k)
			}
		}
	}
}

func TestParseScope(t *testing.T) {
	for _, tc := range []struct{ in, tokens string }{
		{"/subscriptions/S1", "s1.>"},
		{"subscriptions/s1/", "s1.>"},
		{"/subscriptions/s1/resourceGroups/RG1", "s1.rg1.>"},
	} {
		s, err := domain.ParseScope(tc.in)
		if err != nil || s.Tokens() != tc.tokens {
			t.Errorf("ParseScope(%q) = %q, %v; want %q", tc.in, s.Tokens(), err, tc.tokens)
		}
	}
	for _, in := range []string{"", "/", "/subscriptions", "/subscriptions/s1/resourceGroups", "/subscriptions/s1/providers/x",
		"/subscriptions/s1/resourceGroups/rg/providers", "/tenants/t1", "/subscriptions/_", "/subscriptions/s1/resourceGroups/_"} {
		if _, err := domain.ParseScope(in); !errors.Is(err, domain.ErrInvalidScope) {
			t.Errorf("ParseScope(%q) = %v, want ErrInvalidScope", in, err)
		}
	}
}

// A scope's tokens select exactly the located keys its prefix covers.
func TestScope_TokensAgreeWithThePrefix(t *testing.T) {
	scopes := []string{"/subscriptions/s1", "/subscriptions/s1/resourceGroups/rg1"}
	ids := []string{"/subscriptions/s1", "/subscriptions/s1/resourceGroups/rg1", "/subscriptions/s1/resourceGroups/rg1/x/c",
		"/subscriptions/s1/resourceGroups/rg10/x/c", "/subscriptions/s10/resourceGroups/rg1/x/c", "/subscriptions/s1/providers/x"}
	for _, sc := range scopes {
		s, _ := domain.ParseScope(sc)
		for _, id := range ids {
			key := domain.MustKey(id)
			if got, want := server.SubjectMatchesFilter(domain.Located(key), s.Tokens()), s.Covers(key); got != want {
				t.Errorf("scope %s, %s: tokens match %v, prefix covers %v", sc, id, got, want)
			}
		}
	}
}
