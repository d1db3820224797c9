package campaign_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"iter"
	"maps"
	"strings"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

func TestParseList_OneIDALineWithCommentsAndBlanks(t *testing.T) {
	body := "\ufeff# the December fleet\n" +
		"/subscriptions/B/resourceGroups/rg/providers/P/c2\r\n" +
		"\n" +
		"   /subscriptions/a/resourceGroups/rg/providers/P/c1   \n" +
		"  # indented comment\n" +
		"/SUBSCRIPTIONS/a/resourcegroups/RG/providers/p/C1\n" + // c1 again: the casing that sorts first stays
		"/subscriptions/a/resourceGroups/rg/providers/P/c3"
	l, err := campaign.ParseList(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	if l.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA-256 %s, want that of the bytes", l.SHA256)
	}
	want := []string{
		"/SUBSCRIPTIONS/a/resourcegroups/RG/providers/p/C1", // of two casings, the one that sorts first
		"/subscriptions/a/resourceGroups/rg/providers/P/c3",
		"/subscriptions/B/resourceGroups/rg/providers/P/c2",
	}
	if l.Count() != 3 {
		t.Fatalf("count %d, want 3 distinct entities: %+v", l.Count(), l.Entries)
	}
	for i, e := range l.Entries {
		if e.ResourceID != want[i] || e.Key != domain.MustKey(want[i]) {
			t.Errorf("entry %d = %+v, want %s in key order", i, e, want[i])
		}
	}
	ref := l.Ref("obj")
	if ref.Count != 3 || ref.SHA256 != l.SHA256 || l.Check(ref) != nil {
		t.Errorf("ref %+v, check %v", ref, l.Check(ref))
	}
	ref.Count = 4
	if err := l.Check(ref); !errors.Is(err, campaign.ErrInvalidList) {
		t.Errorf("a ref with another count checks: %v", err)
	}
}

func TestParseList_ErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		body string
		line int
	}{
		{"/subscriptions/a/c1\n/subscriptions/a/\x01c2\n", 2},
		{"# header\n\n/ok\n" + strings.Repeat("x", campaign.MaxListLine+1) + "\n", 4},
		{"/ok\n/\n", 2},
	}
	for _, c := range cases {
		_, err := campaign.ParseList(strings.NewReader(c.body))
		var le *campaign.ListError
		if !errors.As(err, &le) || le.Line != c.line || !errors.Is(err, campaign.ErrInvalidList) {
			t.Errorf("%q: got %v, want an error on line %d", c.body[:min(len(c.body), 30)], err, c.line)
		}
	}
	if _, err := campaign.ParseList(strings.NewReader("# nothing\n\n")); !errors.Is(err, campaign.ErrInvalidList) {
		t.Errorf("an empty list: %v", err)
	}
}

func tracked(ids ...string) iter.Seq2[string, string] {
	m := map[string]string{}
	for _, id := range ids {
		m[domain.MustKey(id)] = id
	}
	return maps.All(m) // in no particular order
}

func TestSelect_UnionOfTheListAndTheTrackedUnderThePrefixesOneEntryPerKey(t *testing.T) {
	l, err := campaign.ParseList(strings.NewReader("/subscriptions/a/rg/c1\n/subscriptions/z/c9\n"))
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := campaignspec.ParsePrefix("/subscriptions/A")
	p2, _ := campaignspec.ParsePrefix("/subscriptions/b/rg")
	sel, err := campaign.Select(l, []campaignspec.Prefix{p1, p2}, tracked(
		"/Subscriptions/A/RG/C1", // listed too: the list's casing stays
		"/subscriptions/a/rg/c2",
		"/subscriptions/a",    // the prefix itself
		"/subscriptions/ab/c", // not under /subscriptions/a
		"/subscriptions/b/rg/c3",
		"/subscriptions/b/rg-2/c4", // not under .../rg
		"/subscriptions/c/c5",
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/subscriptions/a", "/subscriptions/a/rg/c1", "/subscriptions/a/rg/c2", "/subscriptions/b/rg/c3", "/subscriptions/z/c9"}
	if len(sel) != len(want) {
		t.Fatalf("selection %+v, want %v", sel, want)
	}
	for i, e := range sel {
		if e.ResourceID != want[i] {
			t.Errorf("entry %d = %s, want %s", i, e.ResourceID, want[i])
		}
	}
	again, _ := campaign.Select(l, []campaignspec.Prefix{p2, p1}, tracked("/subscriptions/b/rg/c3", "/subscriptions/a/rg/c2", "/subscriptions/a", "/Subscriptions/A/RG/C1"))
	if len(again) != len(sel) {
		t.Fatalf("the same entities in another order select %d", len(again))
	}
	for i := range sel {
		if again[i] != sel[i] {
			t.Errorf("entry %d: %+v then %+v: a selection does not depend on the order it is read in", i, sel[i], again[i])
		}
	}
	byKey, _ := campaign.Select(nil, []campaignspec.Prefix{p1}, func(yield func(string, string) bool) { yield("subscriptions/a/x", "") })
	if len(byKey) != 1 || byKey[0].ResourceID != "/subscriptions/a/x" {
		t.Errorf("a tracked entity known by its key alone: %+v", byKey)
	}
	if rej := campaign.CheckSelection(nil); rej == nil || rej.Target != "selection" {
		t.Errorf("an empty selection: %v", rej)
	}
}

func TestSubscription_PrefixOrTheWholeID(t *testing.T) {
	for id, want := range map[string]string{
		"/subscriptions/0b1f/resourceGroups/rg/providers/P/c1": "/subscriptions/0b1f",
		"/SUBSCRIPTIONS/0B1F/resourceGroups/rg":                "/SUBSCRIPTIONS/0B1F",
		"/subscriptions/0b1f":                                  "/subscriptions/0b1f",
		"/subscriptions/":                                      "/subscriptions/",
		"/tenants/t/clusters/c":                                "/tenants/t/clusters/c",
		"subscriptions/x/y":                                    "subscriptions/x",
	} {
		if got := campaign.Subscription(id); got != want {
			t.Errorf("Subscription(%s) = %s, want %s", id, got, want)
		}
		if got, want := campaign.SubscriptionKey(domain.MustKey(id)), domain.MustKey(want); got != want {
			t.Errorf("SubscriptionKey(%s) = %s, want %s", domain.MustKey(id), got, want)
		}
	}
}
