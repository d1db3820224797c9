package web_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"maintsignals/functions/web"
	"maintsignals/test/apijudge"
)

// judge validates every answer of the API against its OpenAPI document (test/apijudge).
type judge struct{ *apijudge.Judge }

func newJudge(t testing.TB) *judge {
	t.Helper()
	b, err := web.Document()
	if err != nil {
		t.Fatal(err)
	}
	j, err := apijudge.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return &judge{j}
}

// answer is an API answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// decode reads the answer's JSON into v.
func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
}

// problem is the answer's problem detail.
func (a answer) problem(t testing.TB) web.Problem {
	t.Helper()
	var p web.Problem
	a.decode(t, &p)
	return p
}

// get asks the API at url (header: name, value, …) and fails the test when the answer is
// not one the document describes.
func (j *judge) get(t testing.TB, url string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.validate(req, resp, body); err != nil {
		t.Errorf("GET %s: %d %s\n%v", req.URL, resp.StatusCode, body, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// validate checks one answer against the document; a path the document does not have may
// be answered by a 404 problem.
func (j *judge) validate(req *http.Request, resp *http.Response, body []byte) error {
	err := j.Validate(escapedKey(req), resp.StatusCode, resp.Header, body)
	if errors.Is(err, apijudge.ErrNoOperation) && resp.StatusCode == http.StatusNotFound &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		return nil
	}
	return err
}

// escapedKey is req with the entity key of its path escaped, as the document has it: the
// API takes the key's slashes unescaped too, which no OpenAPI path template can say.
func escapedKey(req *http.Request) *http.Request {
	rest, ok := strings.CutPrefix(req.URL.EscapedPath(), "/api/v1/entities/")
	if !ok || strings.Contains(strings.ToUpper(rest), "%2F") || !strings.Contains(rest, "/") {
		return req
	}
	k, sub := rest, ""
	if i := strings.LastIndex(rest, "/"); rest[i+1:] == "history" || rest[i+1:] == "notices" {
		k, sub = rest[:i], rest[i:]
	}
	c := req.Clone(req.Context())
	plain, _ := url.PathUnescape(k)
	c.URL.Path = "/api/v1/entities/" + plain + sub
	c.URL.RawPath = "/api/v1/entities/" + strings.ReplaceAll(k, "/", "%2F") + sub
	return c
}
