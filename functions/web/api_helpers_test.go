package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"maintsignals/functions/web"
)

// judge validates every answer of the API against its OpenAPI document with kin-openapi's
// openapi3filter (a validator that knows nothing of this code).
type judge struct {
	doc    *openapi3.T
	router routers.Router
}

func newJudge(t testing.TB) *judge {
	t.Helper()
	b, err := web.Document()
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("the document does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &judge{doc: doc, router: router}
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
		t.Errorf("GET %s: %d %s\nnot as the document says: %v", req.URL, resp.StatusCode, body, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// validate checks one answer against the document (the body too, but of the event stream).
func (j *judge) validate(req *http.Request, resp *http.Response, body []byte) error {
	route, params, err := j.router.FindRoute(escapedKey(req))
	if err != nil {
		if resp.StatusCode == http.StatusNotFound && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			return nil // a path the document does not have: the problem says so
		}
		return fmt.Errorf("no operation of the document: %w", err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true,
			ExcludeResponseBody: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")},
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
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
