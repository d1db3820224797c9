package web_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/test/testenv"
)

// ids are the resource IDs of records.
func ids(rs []fleet.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ResourceID
	}
	return out
}

// entitiesNow is every entity of the fleet as the view holds it now, by resource ID.
func (s *stack) entitiesNow(t testing.TB) map[string]fleet.Record {
	t.Helper()
	out := map[string]fleet.Record{}
	for _, r := range walk(t, newJudge(t), s.url, "", web.MaxAPIPageSize, nil) {
		out[r.ResourceID] = r
	}
	return out
}

// A walk is the fleet as its first page saw it: entities that leave the filter, are
// forgotten, or are created meanwhile change nothing of it, and none comes twice.
func TestAPI_WalkReturnsEachEntityOfItsFirstPageOnceWhileCommandsRun(t *testing.T) {
	s := startStack(t, web.Config{})
	j := newJudge(t)
	start := time.Now().Add(72 * time.Hour).Truncate(time.Hour)
	var pending []string
	for i := range 30 {
		id := rid("s1", fmt.Sprintf("c%02d", i*2)) // room between them for entities created later
		s.send(t, id, domain.TaskPending, withWindow(start, 4*time.Hour))
		pending = append(pending, id)
	}
	s.send(t, rid("s1", "other"), domain.TaskCustomerActionNeeded, nil)
	testenv.Eventually(t, 5*time.Second, "every command in the view", func() bool { return len(s.entitiesNow(t)) == 31 })

	created := []string{rid("s1", "c09x"), rid("s1", "c19x"), rid("s1", "c29x")}
	for _, tc := range []struct{ name, query string }{
		{"filtered by state", "state=pending"},
		{"filtered by prefix and window", url.Values{"prefix": {"/subscriptions/S1"}, "windowStartAfter": {start.Add(-time.Hour).Format(time.RFC3339)}}.Encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := walk(t, j, s.url, tc.query, 4, func(page int) {
				if page != 0 {
					return
				}
				// Between the first page and the second: some leave the filter, one is
				// forgotten, some are created between the keys still to come.
				for _, i := range []int{5, 11, 17, 23} {
					s.send(t, pending[i], domain.TaskEverything, nil)
				}
				s.send(t, pending[27], domain.TaskForget, nil)
				for _, id := range created {
					s.send(t, id, domain.TaskPending, withWindow(start, time.Hour))
				}
				testenv.Eventually(t, 5*time.Second, "the changes in the view", func() bool {
					now := s.entitiesNow(t)
					_, forgotten := now[pending[27]]
					return !forgotten && now[pending[23]].State == domain.StatePlanned
				})
			})
			if !slices.Equal(ids(got), pending) {
				t.Errorf("the walk returned %d entities:\n%v\nwant the %d of its first page, once each:\n%v", len(got), ids(got), len(pending), pending)
			}
		})
		// The next walk begins from the fleet as it is now: restore it for the next case.
		for _, id := range created {
			s.send(t, id, domain.TaskForget, nil)
		}
		for _, i := range []int{5, 11, 17, 23, 27} {
			if i != 27 {
				s.send(t, pending[i], domain.TaskUpdateSucceeded, nil)
			}
			s.send(t, pending[i], domain.TaskPending, withWindow(start, 4*time.Hour))
		}
		testenv.Eventually(t, 5*time.Second, "the fleet restored in the view", func() bool {
			now := s.entitiesNow(t)
			return len(now) == 31 && now[pending[23]].State == domain.StatePending
		})
	}
}

func TestAPI_PageTokenIsOpaqueAndBoundToItsFilter(t *testing.T) {
	s := startTenants(t, web.Config{})
	j := newJudge(t)
	op := bearer(operatorToken)
	for i := range 5 {
		s.send(t, rid("s1", fmt.Sprintf("c%d", i)), domain.TaskCustomerActionNeeded, nil)
	}
	testenv.Eventually(t, 5*time.Second, "every command in the view", func() bool {
		return len(walk(t, j, s.url, "", 100, nil, op...)) == 5
	})
	var first web.EntityList
	j.get(t, s.url+"/api/v1/entities?pageSize=2&state=CustomerActionNeeded", op...).decode(t, &first)
	tok := first.NextPageToken
	if tok == "" || len(first.Items) != 2 {
		t.Fatalf("first page: %+v", first)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	last := first.Items[1].Key
	for _, form := range []string{last, base64.StdEncoding.EncodeToString([]byte(last)), base64.RawURLEncoding.EncodeToString([]byte(last))} {
		if strings.Contains(tok, form) || strings.Contains(string(raw), form) {
			t.Errorf("the token %q shows the key %q", tok, last)
		}
	}
	flipped := []byte(tok)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name, query string
		header      []string
		status      int
	}{
		{"the same filter", "state=customeractionneeded&pageSize=2", op, http.StatusOK},
		{"the same filter, another page size", "state=CustomerActionNeeded&pageSize=3", op, http.StatusOK},
		{"another state", "state=Pending&pageSize=2", op, http.StatusBadRequest},
		{"another filter added", "state=CustomerActionNeeded&prefix=/subscriptions/s1&pageSize=2", op, http.StatusBadRequest},
		{"another holder", "state=CustomerActionNeeded&pageSize=2", bearer(contosoToken), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := j.get(t, s.url+"/api/v1/entities?"+tc.query+"&pageToken="+url.QueryEscape(tok), tc.header...)
			if a.status != tc.status {
				t.Fatalf("%d %s, want %d", a.status, a.body, tc.status)
			}
			if p := a.problem(t); tc.status == http.StatusBadRequest && (p.Target != "pageToken" || p.Type != web.ProblemBase+string(domain.CodeInvalidParameter)) {
				t.Errorf("problem %+v", p)
			}
		})
	}
	for _, bad := range []string{"garbage", string(flipped), base64.RawURLEncoding.EncodeToString([]byte(last))} {
		if a := j.get(t, s.url+"/api/v1/entities?state=CustomerActionNeeded&pageToken="+url.QueryEscape(bad), op...); a.status != http.StatusBadRequest || a.problem(t).Target != "pageToken" {
			t.Errorf("token %q: %d %s", bad, a.status, a.body)
		}
	}
}

// Replicas that share --web-page-key-file read each other's tokens (the walk goes on over the
// fleet as it is, after the token's key); a replica with its own key refuses them.
func TestAPI_ReplicasSharingThePageKeyContinueEachOthersWalks(t *testing.T) {
	key := writeFile(t, "page-key", "a secret the replicas share\n")
	s := startStack(t, web.Config{PageKeyFile: key})
	j := newJudge(t)
	for i := range 5 {
		s.send(t, rid("s1", fmt.Sprintf("c%d", i)), domain.TaskCustomerActionNeeded, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	shared, sharedURL := serve(t, ctx, s.env.JS, web.Config{PageKeyFile: key}, done)
	own, ownURL := serve(t, ctx, s.env.JS, web.Config{}, done)
	testenv.Eventually(t, 10*time.Second, "both replicas hold the fleet", func() bool {
		return shared.Loaded() && own.Loaded() && len(walk(t, j, sharedURL, "", 10, nil)) == 5 && len(walk(t, j, ownURL, "", 10, nil)) == 5
	})
	var first web.EntityList
	j.get(t, s.url+"/api/v1/entities?pageSize=2").decode(t, &first)
	next := "/api/v1/entities?pageSize=10&pageToken=" + url.QueryEscape(first.NextPageToken)
	var rest web.EntityList
	if a := j.get(t, sharedURL+next); a.status != http.StatusOK {
		t.Fatalf("the replica sharing the key: %d %s", a.status, a.body)
	} else {
		a.decode(t, &rest)
	}
	if got := ids(append(first.Items, rest.Items...)); len(got) != 5 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 5 {
		t.Errorf("the walk across replicas: %v", got)
	}
	if a := j.get(t, ownURL+next); a.status != http.StatusBadRequest || a.problem(t).Target != "pageToken" {
		t.Errorf("the replica with its own key: %d %s", a.status, a.body)
	}
}

// The policies come by scope key, page after page; a customer's are those bearing on its
// scopes, and its tokens are its own.
func TestAPI_PoliciesArePagedAndConfined(t *testing.T) {
	s := startTenants(t, web.Config{})
	j := newJudge(t)
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := s.env.JS.KeyValue(ctx, domain.PoliciesBucket)
	if err != nil {
		t.Fatal(err)
	}
	scopes := []string{"/subscriptions/s1", "/subscriptions/s1/resourceGroups/rg-1", "/subscriptions/s2"}
	for _, scope := range scopes {
		doc := `{"scope":"` + scope + `","timeZone":"UTC","windows":[{"rrule":"FREQ=WEEKLY;BYDAY=SA,SU","start":"00:00","duration":"24h"}]}`
		if _, err := kv.Put(ctx, domain.MustKey(scope), []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	policies := func(token string) (got []string, first string) {
		path := "/api/v1/policies?pageSize=1"
		for {
			var l web.PolicyList
			a := j.get(t, s.url+path, bearer(token)...)
			if a.decode(t, &l); a.status != http.StatusOK || len(l.Items) > 1 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			for _, p := range l.Items {
				got = append(got, p.Scope)
			}
			if first == "" {
				first = l.NextPageToken
			}
			if l.NextPageToken == "" {
				return got, first
			}
			path = "/api/v1/policies?pageSize=1&pageToken=" + url.QueryEscape(l.NextPageToken)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the policies in the view", func() bool { got, _ := policies(operatorToken); return len(got) == 3 })
	got, token := policies(operatorToken)
	if !slices.Equal(got, scopes) {
		t.Errorf("the operator's policies: %v, want %v", got, scopes)
	}
	if got, _ := policies(contosoToken); !slices.Equal(got, scopes[:2]) {
		t.Errorf("contoso's policies: %v, want %v", got, scopes[:2])
	}
	if a := j.get(t, s.url+"/api/v1/policies?pageToken="+url.QueryEscape(token), bearer(contosoToken)...); a.status != http.StatusBadRequest {
		t.Errorf("the operator's token asked by contoso: %d %s", a.status, a.body)
	}
	var c web.CampaignList
	a := j.get(t, s.url+"/api/v1/campaigns", bearer(operatorToken)...)
	if a.decode(t, &c); a.status != http.StatusOK || len(c.Items) != 0 {
		t.Errorf("no campaign: %d %s", a.status, a.body)
	}
}
