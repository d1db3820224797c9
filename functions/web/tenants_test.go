package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

const (
	operatorToken = "operator-0123456789abcdef"
	contosoToken  = "contoso-0123456789abcdef"
	fabrikamToken = "fabrikam-0123456789abcdef"
)

// tenantTokens is a tokens file: contoso holds subscription s1, fabrikam one resource group of
// s2.
const tenantTokens = `[
	{"name": "contoso", "token": "` + contosoToken + `", "scopes": ["/subscriptions/s1"]},
	{"name": "fabrikam", "token": "` + fabrikamToken + `", "scopes": ["/subscriptions/S2/resourceGroups/RG-1"]}
]`

// startTenants starts a view that takes the operator's token and the customers' of
// tenantTokens.
func startTenants(t testing.TB, cfg web.Config) *stack {
	t.Helper()
	cfg.TokenFile = writeFile(t, "token", operatorToken+"\n")
	cfg.TokensFile = writeFile(t, "tokens.json", tenantTokens)
	return startStack(t, cfg)
}

// ridIn is a cluster's resource ID in a resource group.
func ridIn(sub, rg, name string) string {
	return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/" + name
}

func TestCustomerTokens_EachHolderCountsListsAndOpensOnlyItsEntities(t *testing.T) {
	s := startTenants(t, web.Config{})
	start := time.Now().Add(72 * time.Hour).Truncate(time.Hour)
	s.send(t, rid("s1", "a"), domain.TaskPending, withWindow(start, 4*time.Hour))
	s.send(t, rid("s1", "b"), domain.TaskEverything, nil)
	s.send(t, rid("s1", "c"), domain.TaskCustomerActionNeeded, nil)
	s.send(t, rid("s2", "d"), domain.TaskPending, withWindow(start, 4*time.Hour))
	s.send(t, ridIn("s2", "rg-2", "e"), domain.TaskCustomerActionNeeded, nil)
	s.send(t, rid("s10", "f"), domain.TaskPending, withWindow(start, 4*time.Hour)) // s1's name, longer
	op := bearer(operatorToken)
	testenv.Eventually(t, 5*time.Second, "every command counted", func() bool {
		var p web.FleetPage
		return getJSON(t, s.url+"/", &p, op...) == http.StatusOK && p.Entities == 6
	})
	day := start.UTC().Format(time.DateOnly)

	for _, tc := range []struct {
		name    string
		token   string
		scopes  []string
		want    []string // the table, in key order
		states  map[domain.State]int
		windows int // on the announced windows' day
	}{
		{"the operator sees the fleet", operatorToken, nil,
			[]string{rid("s1", "a"), rid("s1", "b"), rid("s1", "c"), rid("s10", "f"), rid("s2", "d"), ridIn("s2", "rg-2", "e")},
			map[domain.State]int{domain.StatePending: 3, domain.StateUnplanned: 1, domain.StateCustomerActionNeeded: 2}, 3},
		{"contoso sees s1, not s10", contosoToken, []string{"/subscriptions/s1"},
			[]string{rid("s1", "a"), rid("s1", "b"), rid("s1", "c")},
			map[domain.State]int{domain.StatePending: 1, domain.StateUnplanned: 1, domain.StateCustomerActionNeeded: 1}, 1},
		{"fabrikam sees its resource group, not the rest of s2", fabrikamToken, []string{"/subscriptions/s2/resourcegroups/rg-1"},
			[]string{rid("s2", "d")},
			map[domain.State]int{domain.StatePending: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bearer(tc.token)
			var p web.FleetPage
			if code := getJSON(t, s.url+"/", &p, h...); code != http.StatusOK {
				t.Fatalf("fleet page: %d", code)
			}
			if p.Entities != len(tc.want) || p.Matches != len(tc.want) || !slices.Equal(p.Scopes, tc.scopes) {
				t.Errorf("%d entities, %d matches, scopes %v; want %d, scopes %v", p.Entities, p.Matches, p.Scopes, len(tc.want), tc.scopes)
			}
			for _, st := range domain.States {
				if p.States[st] != tc.states[st] {
					t.Errorf("%s: %d, want %d", st, p.States[st], tc.states[st])
				}
			}
			var rows []string
			for _, r := range p.Rows {
				rows = append(rows, r.ResourceID)
			}
			if !slices.Equal(rows, tc.want) {
				t.Errorf("table %v, want %v", rows, tc.want)
			}
			for _, d := range p.Timeline.Days {
				if d.Date == day && (d.Windows != tc.windows || len(d.First) != tc.windows) {
					t.Errorf("time line on %s: %d windows, %d named, want %d", day, d.Windows, len(d.First), tc.windows)
				}
			}
			// Every one of its entities opens; the others' answer as if never seen.
			for _, id := range []string{rid("s1", "a"), rid("s2", "d"), ridIn("s2", "rg-2", "e"), rid("s10", "f")} {
				var e web.EntityPage
				code := getJSON(t, s.url+"/entities/"+domain.MustKey(id), &e, h...)
				if mine := slices.Contains(tc.want, id); mine && (code != http.StatusOK || e.Record.ResourceID != id) || !mine && code != http.StatusNotFound {
					t.Errorf("the page of %s: %d", id, code)
				}
			}
			// A filter narrows what it sees and never widens it.
			var all, other web.FleetPage
			getJSON(t, s.url+"/?prefix=/subscriptions", &all, h...)
			getJSON(t, s.url+"/?prefix=/subscriptions/s2/resourceGroups/rg-2", &other, h...)
			if all.Matches != len(tc.want) || tc.token != operatorToken && (other.Matches != 0 || len(other.Rows) != 0) {
				t.Errorf("filtered by /subscriptions: %d; by s2's rg-2: %d", all.Matches, other.Matches)
			}
		})
	}
}

// A customer cannot tell another tenant's entity from one that never was: the answers are
// the same, byte for byte but for the entity's name.
func TestCustomerTokens_AnothersEntityAnswersAsNeverSeen(t *testing.T) {
	s := startTenants(t, web.Config{})
	theirs := rid("s2", "d")
	s.send(t, theirs, domain.TaskPending, nil)
	s.send(t, rid("s1", "a"), domain.TaskPending, nil)
	op := bearer(operatorToken)
	testenv.Eventually(t, 5*time.Second, "both counted", func() bool {
		var p web.FleetPage
		return getJSON(t, s.url+"/", &p, op...) == http.StatusOK && p.Entities == 2
	})
	never := rid("s1", "never")
	times := regexp.MustCompile(`<time[^>]*>[^<]*</time>`) // the footer's time of rendering
	for _, accept := range []string{"application/json", "text/html"} {
		code, got := get(t, s.url+"/entities/"+domain.MustKey(theirs), accept, bearer(contosoToken)...)
		wantCode, want := get(t, s.url+"/entities/"+domain.MustKey(never), accept, bearer(contosoToken)...)
		named := strings.NewReplacer(shown(t, never), shown(t, theirs), domain.MustKey(never), domain.MustKey(theirs)).Replace(string(want))
		if code != http.StatusNotFound || wantCode != http.StatusNotFound || times.ReplaceAllString(string(got), "") != times.ReplaceAllString(named, "") {
			t.Errorf("%s: another's entity answers %d %q; one never seen %d %q", accept, code, got, wantCode, want)
		}
	}
	if code, _ := get(t, s.url+"/entities/"+domain.MustKey(theirs), "application/json", op...); code != http.StatusOK {
		t.Errorf("the operator opens it: %d", code)
	}
}

func TestCustomerTokens_CampaignPagesDoNotExistForACustomer(t *testing.T) {
	s := startTenants(t, web.Config{})
	for _, path := range []string{"/campaigns", "/campaigns/pucm-2026-12"} {
		code, b := get(t, s.url+path, "application/json", bearer(contosoToken)...)
		_, none := get(t, s.url+"/nowhere", "application/json", bearer(contosoToken)...)
		if code != http.StatusNotFound || string(b) != strings.Replace(string(none), "/nowhere", path, 1) {
			t.Errorf("%s for a customer: %d %s", path, code, b)
		}
	}
	if code, _ := get(t, s.url+"/campaigns", "application/json", bearer(operatorToken)...); code != http.StatusOK {
		t.Errorf("/campaigns for the operator: %d", code)
	}
	code, b := get(t, s.url+"/", "text/html", bearer(contosoToken)...)
	if html := string(b); code != http.StatusOK || strings.Contains(html, `href="/campaigns"`) || !strings.Contains(html, "Signed in as <strong>contoso</strong>") {
		t.Errorf("a customer's fleet page: %d, links the campaigns or does not say who is signed in", code)
	}
}

func TestCustomerTokens_EveryPageNeedsATokenTheViewTakes(t *testing.T) {
	s := startTenants(t, web.Config{})
	s.send(t, rid("s1", "a"), domain.TaskPending, nil)
	s.send(t, rid("s2", "d"), domain.TaskPending, nil)
	for _, h := range [][]string{nil, bearer("wrong-0123456789abcdef"), bearer(contosoToken + "x"), {"Authorization", contosoToken}} {
		var e struct{ Status int }
		if code := getJSON(t, s.url+"/", &e, h...); code != http.StatusUnauthorized {
			t.Errorf("%v: %d", h, code)
		}
	}
	// A browser signs in with a customer's token: the cookie shows it its entities.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(s.url+"/signin", url.Values{"token": {fabrikamToken}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testenv.Eventually(t, 5*time.Second, "fabrikam's one entity on its page", func() bool {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p web.FleetPage
		return resp.StatusCode == http.StatusOK && decode(resp, &p) == nil && p.Entities == 1 && len(p.Rows) == 1 && p.Rows[0].ResourceID == rid("s2", "d")
	})
}

// A customer's live fleet page hears of the changes within its scopes, and of no other: that
// something happened elsewhere is not its to know.
func TestCustomerTokens_LivePagesHearOnlyOfTheirOwn(t *testing.T) {
	s := startTenants(t, web.Config{})
	mine, theirs := rid("s1", "a"), rid("s2", "d")
	s.send(t, mine, domain.TaskPending, nil)
	s.send(t, theirs, domain.TaskPending, nil)
	op := bearer(operatorToken)
	testenv.Eventually(t, 5*time.Second, "both counted", func() bool {
		var p web.FleetPage
		return getJSON(t, s.url+"/", &p, op...) == http.StatusOK && p.Entities == 2
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Its page does not carry the fleet's count of changes: the stream opens with a refresh.
	code, page := get(t, s.url+"/", "text/html", bearer(contosoToken)...)
	if code != http.StatusOK || !strings.Contains(string(page), `data-seq="0"`) {
		t.Errorf("a customer's page carries the fleet's count of changes: %d", code)
	}
	fleet := events(t, ctx, s.url+"/", bearer(contosoToken)...)
	within(t, fleet, "change", 2*time.Second)
	quiet := func(d time.Duration) bool {
		select {
		case ev := <-fleet:
			t.Logf("heard %q", ev)
			return false
		case <-time.After(d):
			return true
		}
	}
	s.send(t, theirs, domain.TaskEverything, nil)
	testenv.Eventually(t, 5*time.Second, "the other's change in the operator's fleet", func() bool {
		var p web.FleetPage
		getJSON(t, s.url+"/", &p, op...)
		return p.Updating == 1
	})
	if !quiet(time.Second) {
		t.Error("contoso's fleet page heard of a change in s2")
	}
	s.send(t, mine, domain.TaskEverything, nil)
	within(t, fleet, "change", 2*time.Second)
	if code, _ := get(t, s.url+"/entities/"+domain.MustKey(theirs), "text/event-stream", bearer(contosoToken)...); code != http.StatusNotFound {
		t.Errorf("the live stream of another's entity: %d", code)
	}
}

func decode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// shown is a resource ID as the view names an entity it reads from the key.
func shown(t testing.TB, id string) string {
	t.Helper()
	d, err := domain.DecodeKey(domain.MustKey(id))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
