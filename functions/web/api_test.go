package web_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/test/testenv"
)

func TestAPI_ServesTheCommittedDocument(t *testing.T) {
	s := startStack(t, web.Config{})
	j := newJudge(t)
	a := j.get(t, s.url+"/api/v1/openapi.json")
	committed, err := os.ReadFile("../../infra/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusOK || !bytes.Equal(a.body, committed) {
		t.Errorf("the served document (%d, %d bytes) differs from infra/api/openapi.json (%d bytes): run go run ./infra/api", a.status, len(a.body), len(committed))
	}
}

// key is the entity key of a resource ID.
func key(t testing.TB, id string) string {
	t.Helper()
	k, err := domain.Key(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// walk reads every page of the entities under query, pageSize at a time, and calls between
// after each page.
func walk(t testing.TB, j *judge, base, query string, pageSize int, between func(page int), header ...string) []fleet.Record {
	t.Helper()
	var out []fleet.Record
	token := ""
	for page := 0; ; page++ {
		q, _ := url.ParseQuery(query)
		q.Set("pageSize", strconv.Itoa(pageSize))
		if token != "" {
			q.Set("pageToken", token)
		}
		a := j.get(t, base+"/api/v1/entities?"+q.Encode(), header...)
		if a.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", page, a.status, a.body)
		}
		var l web.EntityList
		a.decode(t, &l)
		if len(l.Items) > pageSize {
			t.Fatalf("page %d holds %d items, more than %d", page, len(l.Items), pageSize)
		}
		out = append(out, l.Items...)
		if l.NextPageToken == "" {
			return out
		}
		token = l.NextPageToken
		if between != nil {
			between(page)
		}
	}
}

func TestAPI_EntityIsTheRecordWithItsRevisionAsETag(t *testing.T) {
	s := startStack(t, web.Config{})
	j := newJudge(t)
	id := rid("s1", "c1")
	s.send(t, id, domain.TaskPending, withWindow(time.Now().Add(48*time.Hour), 2*time.Hour))
	k := key(t, id)
	for _, path := range []string{url.PathEscape(k), k} {
		a := j.get(t, s.url+"/api/v1/entities/"+path)
		var r fleet.Record
		a.decode(t, &r)
		if a.status != http.StatusOK || r.ResourceID != id || r.State != domain.StatePending || a.header.Get("ETag") != `"`+strconv.FormatUint(r.Revision, 10)+`"` {
			t.Fatalf("GET %s: %d %s, ETag %s", path, a.status, a.body, a.header.Get("ETag"))
		}
		if again := j.get(t, s.url+"/api/v1/entities/"+path, "If-None-Match", a.header.Get("ETag")); again.status != http.StatusNotModified || len(again.body) != 0 {
			t.Errorf("If-None-Match with the ETag: %d %s", again.status, again.body)
		}
	}
	etag := `"1"`
	s.send(t, id, domain.TaskEverything, nil)
	if a := j.get(t, s.url+"/api/v1/entities/"+url.PathEscape(k), "If-None-Match", etag); a.status != http.StatusOK {
		t.Errorf("If-None-Match with an older revision: %d", a.status)
	}
	if a := j.get(t, s.url+"/api/v1/entities/"+url.PathEscape(key(t, rid("s1", "never")))); a.status != http.StatusNotFound || a.problem(t).Type != web.ProblemBase+"NotFound" {
		t.Errorf("an entity never seen: %d %s", a.status, a.body)
	}
	testenv.Eventually(t, 5*time.Second, "the history holds both outcomes", func() bool {
		var h web.EventList
		j.get(t, s.url+"/api/v1/entities/"+url.PathEscape(k)+"/history").decode(t, &h)
		return len(h.Items) == 2
	})
}

// The judge itself: an answer with a field the document does not name, or without one it
// requires, or of a status it does not list, is refused.
func TestJudge_RefusesAnswersOutsideTheDocument(t *testing.T) {
	j := newJudge(t)
	rec := `{"resourceId":"/x","key":"x","exists":true,"tracked":true,"revision":1,"state":"None","updating":false,"task":"","lastError":"","lastCommandId":"","lastCommandSeq":0,"version":1,"overdue":false,"stuck":false,"conflict":false`
	for _, tc := range []struct {
		name, body string
		status     int
		ok         bool
	}{
		{"the record as it is", rec + `}`, http.StatusOK, true},
		{"a field more", rec + `,"color":"red"}`, http.StatusOK, false},
		{"a required field less", `{"key":"x"}`, http.StatusOK, false},
		{"a state of no kind", strings.Replace(rec, `"None"`, `"Sleeping"`, 1) + `}`, http.StatusOK, false},
		{"an error answered with a record", rec + `}`, http.StatusTeapot, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://view/api/v1/entities/x", nil)
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"1"`}}}
			if err := j.validate(req, resp, []byte(tc.body)); (err == nil) != tc.ok {
				t.Errorf("valid %v, want %v: %v", err == nil, tc.ok, err)
			}
		})
	}
}

// The fleet page and the API answer one query of one index: the same records, in the same
// shape, for the same filter.
func TestAPI_AnswersTheFleetPagesRecords(t *testing.T) {
	s := startStack(t, web.Config{})
	j := newJudge(t)
	for i, task := range []domain.Task{domain.TaskCustomerActionNeeded, domain.TaskEverything, domain.TaskCustomerActionNeeded} {
		s.send(t, rid("s1", strconv.Itoa(i)), task, nil)
	}
	testenv.Eventually(t, 5*time.Second, "every command in the view", func() bool { return s.fleet(t, "").Entities == 3 })
	page := s.fleet(t, "?state=customeractionneeded")
	var l web.EntityList
	j.get(t, s.url+"/api/v1/entities?state=customeractionneeded").decode(t, &l)
	if len(l.Items) != 2 || !reflect.DeepEqual(page.Rows, l.Items) {
		t.Errorf("the fleet page's records\n%+v\nthe API's\n%+v", page.Rows, l.Items)
	}
}
