package policy_test

import (
	"slices"
	"testing"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

func TestParseScope_ExactlyThreeShapes(t *testing.T) {
	cases := []struct {
		in    string
		level policy.Level // 0: refused
		key   string
	}{
		{"/subscriptions/0B1F", policy.LevelSubscription, "subscriptions/0b1f"},
		{"/subscriptions/0b1f/resourceGroups/RG-1", policy.LevelResourceGroup, "subscriptions/0b1f/resourcegroups/rg-1"},
		{"/SUBSCRIPTIONS/0b1f/RESOURCEGROUPS/rg-1", policy.LevelResourceGroup, "subscriptions/0b1f/resourcegroups/rg-1"},
		{"/subscriptions/0b1f/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1", policy.LevelResource,
			"subscriptions/0b1f/resourcegroups/rg-1/providers/microsoft=2eredhatopenshift/openshiftclusters/c1"},
		{"/subscriptions/0b1f/providers/Microsoft.Network/dnszones/z", policy.LevelResource, "subscriptions/0b1f/providers/microsoft=2enetwork/dnszones/z"},
		{"/subscriptions/0b1f/resourceGroups/rg-1/x", policy.LevelResource, "subscriptions/0b1f/resourcegroups/rg-1/x"},
		{"/fleet/c1", policy.LevelResource, "fleet/c1"},
		{"/subscriptions", 0, ""},
		{"/subscriptions/0b1f/resourceGroups", 0, ""},
		{"/subscriptions/0b1f/", 0, ""},
		{"/subscriptions/0b1f/resourceGroups/rg-1/", 0, ""},
		{"/subscriptions//resourceGroups/rg-1", 0, ""},
		{"subscriptions/0b1f", 0, ""},
		{"", 0, ""},
		{"/", 0, ""},
		{"/subscriptions/0b1f\x00", 0, ""},
	}
	for _, c := range cases {
		s, rej := policy.ParseScope(c.in)
		if c.level == 0 {
			if rej == nil || rej.Target != "scope" || rej.Code != domain.CodeInvalidParameter {
				t.Errorf("ParseScope(%q) = %+v, %v; want InvalidParameter on scope", c.in, s, rej)
			}
			continue
		}
		if rej != nil || s.Level != c.level || s.Key != c.key || s.ID != c.in {
			t.Errorf("ParseScope(%q) = %+v, %v; want level %v key %q", c.in, s, rej, c.level, c.key)
		}
	}
}

func TestCandidateKeys_MostSpecificFirst(t *testing.T) {
	cases := []struct {
		id   string
		want []string
	}{
		{"/subscriptions/0B1F/resourceGroups/RG-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/C1", []string{
			"subscriptions/0b1f/resourcegroups/rg-1/providers/microsoft=2eredhatopenshift/openshiftclusters/c1",
			"subscriptions/0b1f/resourcegroups/rg-1",
			"subscriptions/0b1f",
		}},
		{"/subscriptions/0b1f/providers/Microsoft.Network/dnszones/z", []string{
			"subscriptions/0b1f/providers/microsoft=2enetwork/dnszones/z",
			"subscriptions/0b1f",
		}},
		{"/subscriptions/0b1f/resourceGroups/rg-1", []string{"subscriptions/0b1f/resourcegroups/rg-1", "subscriptions/0b1f"}},
		{"/subscriptions/0b1f", []string{"subscriptions/0b1f"}},
		{"/subscriptions/0b1f/resourceGroups", []string{"subscriptions/0b1f"}},
		{"/fleet/c1", []string{"fleet/c1"}},
		{"subscriptions/0b1f/resourceGroups/rg-1/c1", []string{"subscriptions/0b1f/resourcegroups/rg-1/c1", "subscriptions/0b1f/resourcegroups/rg-1", "subscriptions/0b1f"}},
	}
	for _, c := range cases {
		got, err := policy.CandidateKeysOf(c.id)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("CandidateKeysOf(%q) = %q, %v; want %q", c.id, got, err, c.want)
		}
		if k := domain.MustKey(c.id); !slices.Equal(policy.CandidateKeys(k), got) {
			t.Errorf("CandidateKeys(%q) = %q, want as from the ID %q", k, policy.CandidateKeys(k), got)
		}
	}
	if _, err := policy.CandidateKeysOf(""); err == nil {
		t.Error("CandidateKeysOf(\"\") succeeded, want an invalid resource ID")
	}
}

func TestCandidateKeys_EachIsTheKeyOfTheScopeThatCoversIt(t *testing.T) {
	// What a store finds under a candidate key is the policy set for that scope, whatever its casing.
	id := "/subscriptions/0B1F/resourceGroups/Rg-1/providers/P.Q/c/C1"
	got, _ := policy.CandidateKeysOf(id)
	for i, scope := range []string{id, "/subscriptions/0b1f/RESOURCEGROUPS/rg-1", "/Subscriptions/0b1f"} {
		s, rej := policy.ParseScope(scope)
		if rej != nil || s.Key != got[i] || !s.Covers(domain.MustKey(id)) {
			t.Errorf("scope %q: key %q covers %v; candidate %d is %q", scope, s.Key, s.Covers(domain.MustKey(id)), i, got[i])
		}
	}
	rg, _ := policy.ParseScope("/subscriptions/0b1f/resourceGroups/rg-1")
	if rg.Covers(domain.MustKey("/subscriptions/0b1f/resourceGroups/rg-10/c1")) {
		t.Error("rg-1 covers an entity of rg-10: a scope must end at a path segment")
	}
}
