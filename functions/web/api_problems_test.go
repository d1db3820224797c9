package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/test/testenv"
)

func TestAPI_AnswersProblemsWithATypePerCode(t *testing.T) {
	s := startTenants(t, web.Config{})
	j := newJudge(t)
	op := bearer(operatorToken)
	for _, tc := range []struct {
		name, method, path string
		header             []string
		status             int
		code               domain.Code
		target             string
	}{
		{"no token", "GET", "/api/v1/entities", nil, http.StatusUnauthorized, domain.CodeUnauthorized, ""},
		{"a wrong token", "GET", "/api/v1/entities", bearer("wrong-0123456789abcdef"), http.StatusUnauthorized, domain.CodeUnauthorized, ""},
		{"a page too large", "GET", "/api/v1/entities?pageSize=1001", op, http.StatusBadRequest, domain.CodeInvalidParameter, "pageSize"},
		{"a negative page size", "GET", "/api/v1/entities?pageSize=-1", op, http.StatusBadRequest, domain.CodeInvalidParameter, "pageSize"},
		{"an unknown state", "GET", "/api/v1/entities?state=Sleeping", op, http.StatusBadRequest, domain.CodeInvalidParameter, "state"},
		{"updating not a boolean", "GET", "/api/v1/entities?updating=maybe", op, http.StatusBadRequest, domain.CodeInvalidParameter, "updating"},
		{"a time that does not read", "GET", "/api/v1/entities?windowStartBefore=tomorrow", op, http.StatusBadRequest, domain.CodeInvalidParameter, "windowStartBefore"},
		{"a feed id that does not read", "GET", "/api/v1/events", append([]string{"Last-Event-ID", "e1:2.zz"}, op...), http.StatusBadRequest, domain.CodeInvalidParameter, "Last-Event-ID"},
		{"a key that is not one", "GET", "/api/v1/entities/" + url.PathEscape("Not A Key"), op, http.StatusNotFound, web.CodeNotFound, ""},
		{"a campaign never made", "GET", "/api/v1/campaigns/c-1", op, http.StatusNotFound, web.CodeNotFound, ""},
		{"the campaigns, to a customer", "GET", "/api/v1/campaigns", bearer(contosoToken), http.StatusNotFound, web.CodeNotFound, ""},
		{"no such resource", "GET", "/api/v1/clusters", op, http.StatusNotFound, web.CodeNotFound, ""},
		{"a write", "POST", "/api/v1/entities", op, http.StatusMethodNotAllowed, domain.CodeRequestNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			if tc.method == http.MethodGet {
				a = j.get(t, s.url+tc.path, tc.header...)
			} else {
				a = send(t, tc.method, s.url+tc.path, tc.header...)
			}
			if a.status != tc.status || !strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("%d %s %s, want %d", a.status, a.header.Get("Content-Type"), a.body, tc.status)
			}
			p := a.problem(t)
			if p.Type != web.ProblemBase+string(tc.code) || p.Status != tc.status || p.Code != tc.code || p.Target != tc.target || p.Title == "" || p.Detail == "" {
				t.Errorf("problem %+v, want code %s target %q", p, tc.code, tc.target)
			}
		})
	}
}

// send asks with another method than GET.
func send(t testing.TB, method, url string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: []byte(b.String())}
}

// A customer's token sees the entities of its scopes, their history and policies, and
// another tenant's entity is one never seen.
func TestAPI_CustomerTokensSeeTheirScopesOnly(t *testing.T) {
	s := startTenants(t, web.Config{})
	j := newJudge(t)
	s.send(t, rid("s1", "a"), domain.TaskCustomerActionNeeded, nil)
	s.send(t, rid("s10", "b"), domain.TaskCustomerActionNeeded, nil)
	s.send(t, ridIn("S2", "RG-1", "c"), domain.TaskCustomerActionNeeded, nil)
	testenv.Eventually(t, 5*time.Second, "every command in the view", func() bool {
		return len(walk(t, j, s.url, "", 10, nil, bearer(operatorToken)...)) == 3
	})
	for _, tc := range []struct {
		name  string
		token string
		sees  []string
	}{
		{"the operator", operatorToken, []string{rid("s1", "a"), rid("s10", "b"), ridIn("S2", "RG-1", "c")}},
		{"a subscription's holder", contosoToken, []string{rid("s1", "a")}},
		{"a resource group's holder", fabrikamToken, []string{ridIn("S2", "RG-1", "c")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(walk(t, j, s.url, "", 1, nil, bearer(tc.token)...))
			if strings.Join(got, " ") != strings.Join(tc.sees, " ") {
				t.Errorf("sees %v, want %v", got, tc.sees)
			}
			for _, id := range []string{rid("s1", "a"), rid("s10", "b")} {
				want := http.StatusNotFound
				if strings.Contains(strings.Join(tc.sees, " "), id) {
					want = http.StatusOK
				}
				for _, sub := range []string{"", "/history", "/notices"} {
					a := j.get(t, s.url+"/api/v1/entities/"+url.PathEscape(key(t, id))+sub, bearer(tc.token)...)
					if a.status != want {
						t.Errorf("%s%s: %d, want %d", id, sub, a.status, want)
					}
				}
			}
		})
	}
	var r fleet.Record
	j.get(t, s.url+"/api/v1/entities/"+url.PathEscape(key(t, rid("s1", "a"))), bearer(contosoToken)...).decode(t, &r)
	if r.State != domain.StateCustomerActionNeeded {
		t.Errorf("the holder's own record: %+v", r)
	}
}
