package campaignspec_test

import (
	"strings"
	"testing"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/campaignspec/spectest"
	"maintsignals/shared/domain"
)

func TestParseSpec_ReadsTheContractsExample(t *testing.T) {
	s := spectest.MustSpec(t, []byte(spectest.Example))
	switch {
	case s.ID != "pucm-2026-12" || s.Task != domain.TaskEverything || s.Reason != "PUCM: control plane upgrade":
		t.Errorf("id, task, reason = %q %q %q", s.ID, s.Task, s.Reason)
	case s.List == nil || s.List.Count != 100000 || s.List.SHA256 != spectest.SHA || len(s.Prefixes) != 0:
		t.Errorf("selection = %+v %+v", s.List, s.Prefixes)
	case s.Length != 4*time.Hour || !s.Earliest.Equal(spectest.UTC("2026-12-15T00:00:00Z")) || !s.Deadline.Equal(spectest.UTC("2027-01-15T00:00:00Z")):
		t.Errorf("window = %v %v %v", s.Length, s.Earliest, s.Deadline)
	case s.Across != 14*domain.Day || s.Slot != 15*time.Minute || s.MaxPerSlot != 500 || s.MaxPerSubscription != 20:
		t.Errorf("spread = %v %v %d %d", s.Across, s.Slot, s.MaxPerSlot, s.MaxPerSubscription)
	case s.Seed != "pucm-2026-12":
		t.Errorf("seed = %q, want the campaign id by default", s.Seed)
	case s.AnnounceLead != 14*domain.Day || s.PreferredSlots() != 1344:
		t.Errorf("lead %v, preferred slots %d", s.AnnounceLead, s.PreferredSlots())
	case len(s.Waves) != 2 || !s.Waves[0].Manual || s.Waves[1].Manual || s.Waves[1].Threshold.String() != "2%" || s.Waves[0].Threshold.Set():
		t.Errorf("waves = %+v", s.Waves)
	}
}

func TestDecodeDocument_RefusesWhatIsNotStrictlyTheSpec(t *testing.T) {
	cases := []struct {
		name, body string
		code       domain.Code
		target     string
	}{
		{"not JSON", `{"id":`, domain.CodeInvalidRequestContent, ""},
		{"not an object", `["id"]`, domain.CodeInvalidRequestContent, ""},
		{"data after the object", `{"id": "a"} {}`, domain.CodeInvalidRequestContent, ""},
		{"not UTF-8", "{\"id\": \"\xff\"}", domain.CodeInvalidRequestContent, ""},
		{"too large", `{"reason": "` + strings.Repeat("x", campaignspec.MaxSpecBytes) + `"}`, domain.CodeInvalidRequestContent, ""},
		{"unknown field", `{"id": "a", "owner": "me"}`, domain.CodeInvalidParameter, "owner"},
		{"unknown nested field", `{"spread": {"slot": "15m", "jitter": "1m"}}`, domain.CodeInvalidParameter, "spread.jitter"},
		{"unknown field in a wave", `{"waves": [{"name": "a"}, {"name": "b", "gates": "manual"}]}`, domain.CodeInvalidParameter, "waves[1].gates"},
		{"another casing", `{"ID": "a"}`, domain.CodeInvalidParameter, "ID"},
		{"a field twice", `{"id": "a", "id": "b"}`, domain.CodeInvalidParameter, "id"},
		{"a number as a string", `{"spread": {"maxPerSlot": "500"}}`, domain.CodeInvalidParameter, "spread.maxPerSlot"},
		{"a fraction", `{"spread": {"maxPerSlot": 1.5}}`, domain.CodeInvalidParameter, "spread.maxPerSlot"},
		{"a huge count", `{"selection": {"list": {"count": 1e20}}}`, domain.CodeInvalidParameter, "selection.list.count"},
		{"a duration as a number", `{"announceLead": 336}`, domain.CodeInvalidParameter, "announceLead"},
		{"null for a string", `{"task": null}`, domain.CodeInvalidParameter, "task"},
		{"an object for a list", `{"waves": {"name": "a"}}`, domain.CodeInvalidParameter, "waves"},
		{"a number in prefixes", `{"selection": {"prefixes": ["/subscriptions/a", 7]}}`, domain.CodeInvalidParameter, "selection.prefixes[1]"},
	}
	for _, c := range cases {
		_, rej := campaignspec.DecodeDocument([]byte(c.body))
		if rej == nil || rej.Code != c.code || rej.Target != c.target {
			t.Errorf("%s: got %v, want %s on %q", c.name, rej, c.code, c.target)
		}
	}
	if _, rej := campaignspec.DecodeDocument([]byte(`{"selection": {"list": null}, "waves": null}`)); rej != nil {
		t.Errorf("null for an absent list or object: %v", rej)
	}
}

func TestCompile_NamesTheFieldAtFault(t *testing.T) {
	cases := []struct {
		name, path string
		value      any
		target     string
	}{
		{"no id", "id", spectest.Del, "id"},
		{"an id with capitals", "id", "PUCM", "id"},
		{"an id too long", "id", strings.Repeat("a", 41), "id"},
		{"a reason too long", "reason", strings.Repeat("x", domain.MaxReasonBytes+1), "reason"},
		{"a reason with a control character", "reason", "a\x00b", "reason"},
		{"no task", "task", spectest.Del, "task"},
		{"a signal task", "task", "Pending", "task"},
		{"a task in another case", "task", "everything", "task"},
		{"nothing selected", "selection", map[string]any{}, "selection"},
		{"a list without its object", "selection.list.object", "", "selection.list.object"},
		{"a list with a bad sha256", "selection.list.sha256", strings.ToUpper(spectest.SHA), "selection.list.sha256"},
		{"a list of nothing", "selection.list.count", 0, "selection.list.count"},
		{"a prefix without /", "selection.prefixes", []any{"subscriptions/a"}, "selection.prefixes[0]"},
		{"a prefix ending in /", "selection.prefixes", []any{"/subscriptions/a", "/subscriptions/b/"}, "selection.prefixes[1]"},
		{"no length", "window.length", spectest.Del, "window.length"},
		{"a length in days", "window.length", "8d", "window.length"},
		{"a length not a duration", "window.length", "four hours", "window.length"},
		{"a length too short", "window.length", "30s", "window.length"},
		{"no earliest", "window.earliest", spectest.Del, "window.earliest"},
		{"an earliest without a zone", "window.earliest", "2026-12-15T00:00:00", "window.earliest"},
		{"a deadline before earliest", "window.deadline", "2026-12-14T00:00:00Z", "window.deadline"},
		{"a deadline too near for one window", "window.deadline", "2026-12-15T03:59:59Z", "window.deadline"},
		{"a deadline more than a year out", "window.deadline", "2027-12-17T00:00:00Z", "window.deadline"},
		{"a slot of seconds", "spread.slot", "30s", "spread.slot"},
		{"no slot", "spread.slot", spectest.Del, "spread.slot"},
		{"across not whole slots", "spread.across", "336h10m", "spread.across"},
		{"across shorter than a slot", "spread.across", "10m", "spread.across"},
		{"across past the deadline", "spread.across", "31d", "spread.across"},
		{"no cap", "spread.maxPerSlot", 0, "spread.maxPerSlot"},
		{"a negative subscription cap", "spread.maxPerSlotPerSubscription", -1, "spread.maxPerSlotPerSubscription"},
		{"a subscription cap over the slot's", "spread.maxPerSlotPerSubscription", 501, "spread.maxPerSlotPerSubscription"},
		{"a seed with a newline", "spread.seed", "a\nb", "spread.seed"},
		{"no lead", "announceLead", spectest.Del, "announceLead"},
		{"a negative lead", "announceLead", "-1h", "announceLead"},
		{"a wave without a name", "waves[0].name", "", "waves[0].name"},
		{"a wave named twice", "waves[1].name", "canary", "waves[1].name"},
		{"another gate", "waves[0].gate", "auto", "waves[0].gate"},
		{"a threshold without %", "waves[1].failureThreshold", "2", "waves[1].failureThreshold"},
		{"a threshold over 100%", "waves[1].failureThreshold", "101%", "waves[1].failureThreshold"},
		{"a negative threshold", "waves[1].failureThreshold", "-1%", "waves[1].failureThreshold"},
		{"a wave before the last without prefixes", "waves[0].prefixes", spectest.Del, "waves[0].prefixes"},
		{"a bad wave prefix", "waves[0].prefixes", []any{"/subscriptions/a//b"}, "waves[0].prefixes[0]"},
	}
	for _, c := range cases {
		_, rej := campaignspec.ParseSpec(spectest.Edit(t, c.path, c.value))
		if rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != c.target {
			t.Errorf("%s: got %v, want InvalidParameter on %q", c.name, rej, c.target)
		}
	}
}

func TestCompile_AcceptsTheEdges(t *testing.T) {
	for _, c := range []struct {
		name, path string
		value      any
	}{
		{"a list alone", "selection.prefixes", spectest.Del},
		{"prefixes alone", "selection", map[string]any{"prefixes": []any{"/subscriptions/a"}}},
		{"no waves", "waves", spectest.Del},
		{"no subscription cap", "spread.maxPerSlotPerSubscription", spectest.Del},
		{"a subscription cap equal to the slot's", "spread.maxPerSlotPerSubscription", 500},
		{"a lead of zero", "announceLead", "0"},
		{"across to the last window that fits", "spread.across", "30d20h15m"},
		{"a threshold of 0%", "waves[1].failureThreshold", "0%"},
		{"a threshold of 100%", "waves[1].failureThreshold", "100%"},
		{"a fractional threshold", "waves[1].failureThreshold", "0.25%"},
		{"a last wave with prefixes", "waves[1].prefixes", []any{"/subscriptions/b"}},
		{"an earliest with an offset", "window.earliest", "2026-12-15T01:00:00+01:00"},
	} {
		if _, rej := campaignspec.ParseSpec(spectest.Edit(t, c.path, c.value)); rej != nil {
			t.Errorf("%s: %v", c.name, rej)
		}
	}
}

func TestDigest_IsTheSameForTheSameMeaning(t *testing.T) {
	base := spectest.MustSpec(t, []byte(spectest.Example)).Digest()
	same := [][]byte{
		spectest.Edit(t, "announceLead", "2w"),
		spectest.Edit(t, "spread.across", "14d"),
		spectest.Edit(t, "spread.seed", "pucm-2026-12"),
		spectest.Edit(t, "window.earliest", "2026-12-15T01:00:00+01:00"),
		spectest.Edit(t, "waves[1].failureThreshold", "2.00%"),
		spectest.Edit(t, "waves[0].prefixes", []any{"/SUBSCRIPTIONS/AAAA", "/subscriptions/aaaa"}),
		spectest.Edit(t, "selection.prefixes", spectest.Del),
	}
	for i, b := range same {
		if got := spectest.MustSpec(t, b).Digest(); got != base {
			t.Errorf("variant %d: digest %s, want %s\n%s", i, got, base, b)
		}
	}
	other := [][]byte{
		spectest.Edit(t, "announceLead", "335h"),
		spectest.Edit(t, "spread.seed", "again"),
		spectest.Edit(t, "reason", "another reason"),
		spectest.Edit(t, "waves[1].failureThreshold", "3%"),
		spectest.Edit(t, "spread.maxPerSlotPerSubscription", 19),
	}
	for i, b := range other {
		if spectest.MustSpec(t, b).Digest() == base {
			t.Errorf("other %d: same digest as the example\n%s", i, b)
		}
	}
}

func TestCanonical_ReadsBackToTheSameSpec(t *testing.T) {
	s := spectest.MustSpec(t, spectest.Edit(t, "waves[0].prefixes", []any{"/subscriptions/BBB", "/Subscriptions/aaa"}))
	c := s.Canonical()
	again := spectest.MustSpec(t, c)
	if string(again.Canonical()) != string(c) || again.Digest() != s.Digest() {
		t.Fatalf("canonical form is not a fixed point:\n%s\n%s", c, again.Canonical())
	}
	for _, want := range []string{`"announceLead":"2w"`, `"across":"2w"`, `"seed":"pucm-2026-12"`, `"prefixes":["/subscriptions/aaa","/subscriptions/bbb"]`, `"failureThreshold":"2%"`} {
		if !strings.Contains(string(c), want) {
			t.Errorf("canonical form lacks %s:\n%s", want, c)
		}
	}
	if s := spectest.MustSpec(t, spectest.Edit(t, "waves", spectest.Del)); strings.Contains(string(s.Canonical()), "waves") {
		t.Errorf("a spec without waves writes them: %s", s.Canonical())
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]string{"2%": "2%", "0%": "0%", "100%": "100%", "0.5%": "0.5%", "2.50%": "2.5%", "0.0001%": "0.0001%", "": ""} {
		th, rej := campaignspec.ParseThreshold(in)
		if rej != nil || th.String() != want {
			t.Errorf("ParseThreshold(%q) = %q, %v; want %q", in, th, rej, want)
		}
	}
	for _, in := range []string{"2", "%", "2 %", "1e1%", "100.0001%", "0.00001%", ".5%", "5.%", "-0%", "+1%", "x%"} {
		if th, rej := campaignspec.ParseThreshold(in); rej == nil {
			t.Errorf("ParseThreshold(%q) = %s, want a rejection", in, th)
		}
	}
	two, _ := campaignspec.ParseThreshold("2%")
	zero, _ := campaignspec.ParseThreshold("0%")
	all, _ := campaignspec.ParseThreshold("100%")
	for _, c := range []struct {
		th           campaignspec.Threshold
		failed, size int
		want         bool
	}{
		{two, 2, 100, false}, {two, 3, 100, true}, {two, 20, 1000, false}, {two, 21, 1000, true},
		{zero, 0, 10, false}, {zero, 1, 10, true}, {all, 10, 10, false}, {campaignspec.Threshold{}, 10, 10, false},
	} {
		if got := c.th.Exceeded(c.failed, c.size); got != c.want {
			t.Errorf("%s: %d failed of %d exceeded = %t, want %t", c.th, c.failed, c.size, got, c.want)
		}
	}
}

func TestWaveOf_TheFirstWaveThatCoversTheEntity(t *testing.T) {
	s := spectest.MustSpec(t, spectest.Edit(t, "waves", []any{
		map[string]any{"name": "canary", "prefixes": []any{"/subscriptions/aaaa/resourceGroups/rg-1"}},
		map[string]any{"name": "early", "prefixes": []any{"/subscriptions/aaaa", "/subscriptions/bbbb"}},
		map[string]any{"name": "rest"},
	}))
	cases := map[string]int{
		"subscriptions/aaaa/resourcegroups/rg-1/providers/x/c1": 0, // in canary and early: the first
		"subscriptions/aaaa/resourcegroups/rg-10/c":             1, // rg-10 is not under rg-1
		"subscriptions/bbbb":                                    1,
		"subscriptions/aaaab/c":                                 2,
		"other/c":                                               2,
	}
	for key, want := range cases {
		if got := s.WaveOf(key); got != want {
			t.Errorf("WaveOf(%s) = %d, want %d", key, got, want)
		}
	}
	closed := spectest.MustSpec(t, spectest.Edit(t, "waves[1].prefixes", []any{"/subscriptions/bbbb"}))
	if got := closed.WaveOf("subscriptions/cccc/c"); got != -1 {
		t.Errorf("an entity no wave covers is in wave %d, want -1", got)
	}
	if got := spectest.MustSpec(t, spectest.Edit(t, "waves", spectest.Del)).WaveOf("x"); got != 0 {
		t.Errorf("without waves, an entity is in wave %d, want the implicit 0", got)
	}
}
