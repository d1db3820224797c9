package domain

import "testing"

func TestPrefix_EndsAtAPathSegmentInAnyCasing(t *testing.T) {
	const rg1 = "/subscriptions/s/resourceGroups/rg-1"
	for _, tc := range []struct {
		name, prefix, id string
		covers           bool
	}{
		{"the resource group itself", rg1, rg1, true},
		{"an entity in it", rg1, rg1 + "/providers/x/c1", true},
		{"another group whose name continues it", rg1, "/subscriptions/s/resourceGroups/rg-10/providers/x/c1", false},
		{"in another casing", "/SUBSCRIPTIONS/S/RESOURCEGROUPS/RG-1", rg1 + "/providers/x/c1", true},
		{"typed with a trailing slash", rg1 + "/", rg1 + "/providers/x/c1", true},
		{"typed without the leading slash", rg1[1:], rg1 + "/providers/x/c1", true},
		{"a prefix that ends inside a segment", "/subscriptions/s/resourceGroups/rg", rg1, false},
		{"the whole ID of another entity", rg1 + "/providers/x/c1", rg1 + "/providers/x/c10", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePrefixLoose(tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.CoversID(tc.id); got != tc.covers {
				t.Errorf("%s covers %s: %v, want %v", tc.prefix, tc.id, got, tc.covers)
			}
		})
	}
}

func TestParsePrefix_RefusesWhatIsNoPrefix(t *testing.T) {
	for _, s := range []string{"", "/", "/a//b", "/a/", "a/b", "/a\x00b"} {
		if _, err := ParsePrefix(s); err == nil {
			t.Errorf("%q read as a prefix", s)
		}
	}
	if p := (Prefix{}); !p.CoversID("/anything") {
		t.Error("the zero prefix does not cover every entity")
	}
}
