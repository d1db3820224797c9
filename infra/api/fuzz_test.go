package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/functions/web"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// A fuzz of every operation of the document through Prism, a validating proxy
// (`prism proxy openapi.json <stack> --errors`) in front of a real stack: generated parameters,
// valid and not, garbage tokens and filters. Prism answers 422 itself to a request outside
// the document's parameters and 500 (with sl-violations) to an answer outside the document;
// the API must never answer 5xx. The event stream is judged by the API's own tests: a valid
// request to it never ends, and Prism validates a body once it has ended.

// fuzzRounds is how many requests each operation gets.
const fuzzRounds = 60

// The view of the fuzz takes the operator's token and a customer's (of subscription s1).
const (
	operatorToken = "fuzz-operator-0123456789abcdef"
	customerToken = "fuzz-customer-0123456789abcdef"
)

func TestPrism_FuzzOfEveryOperationFindsNoServerErrorAndNoAnswerOutsideTheDocument(t *testing.T) {
	prism := tool(t, "MAINT_PRISM", "prism-"+prismVersion+"/node_modules/.bin/prism",
		"npm install --prefix ~/.cache/maintsignals/prism-"+prismVersion+" @stoplight/prism-cli@"+prismVersion)
	upstream, keys := fuzzStack(t)
	base := startPrism(t, prism, upstream)
	g := &generator{r: rand.New(rand.NewPCG(17, 35)), keys: keys, token: pageTokenOf(t, upstream)}
	var sent, reached, refused int
	for _, op := range g.operations() {
		for range fuzzRounds {
			path, header, ok := op()
			if !ok {
				continue
			}
			header = g.auth(header)
			status, body, violations := fuzzGet(t, base+path, header)
			sent++
			switch {
			case status == http.StatusUnprocessableEntity && strings.Contains(body, "stoplight.io/prism"):
				refused++ // outside the document's parameters: Prism refuses it before the API
			case status >= 500 || violations != "":
				t.Errorf("GET %s %v: %d %s %s", path, header, status, violations, body)
			default:
				reached++
			}
		}
	}
	t.Logf("fuzz: %d requests through Prism, %d answered by the API within the document, %d refused by Prism as outside its parameters", sent, reached, refused)
	// Prism resets the connection on a path that is not UTF-8: those go to the API directly.
	for range fuzzRounds {
		b := make([]byte, 1+g.r.IntN(30))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		path := g.pick("/api/v1/entities/", "/api/v1/campaigns/", "/api/v1/entities?prefix=", "/api/v1/entities?pageToken=") + url.PathEscape(string(b))
		if status, body, _ := fuzzGet(t, upstream+path, g.auth(nil)); status >= 500 {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	if reached < sent/2 {
		t.Errorf("only %d of %d requests reached the API", reached, sent)
	}
}

// fuzzStack starts a stack with a few entities and returns the view's address and their keys.
func fuzzStack(t *testing.T) (string, []string) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	go func() { done <- command.Run(ctx, env.JS, command.Config{Log: testenv.Quiet()}) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokens, operator := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "token")
	if err := errors.Join(os.WriteFile(operator, []byte(operatorToken), 0o600), os.WriteFile(tokens,
		[]byte(`[{"name": "customer", "token": "`+customerToken+`", "scopes": ["/subscriptions/s1"]}]`), 0o600)); err != nil {
		t.Fatal(err)
	}
	v, err := web.New(env.JS, web.Config{Listener: ln, Logger: testenv.Quiet(), Retry: 100 * time.Millisecond,
		TokenFile: operator, TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- v.Serve(ctx, ln) }()
	cl, err := client.New(testenv.Connect(t, env.Server), testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	start := time.Now().Add(48 * time.Hour).UTC()
	for i, task := range []domain.Task{domain.TaskPending, domain.TaskEverything, domain.TaskCustomerActionNeeded, domain.TaskPending, domain.TaskCertificatesRenewal} {
		id := fmt.Sprintf("/subscriptions/s%d/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", i%2, i)
		c := domain.Command{ID: client.NewCommandID("fuzz"), ResourceID: id, Task: task, Actor: "fuzz"}
		if task == domain.TaskPending {
			c.Window, c.Reason = &domain.Window{Start: start, End: start.Add(time.Hour)}, "fuzz"
		}
		sctx, stop := context.WithTimeout(ctx, 15*time.Second)
		_, err := cl.Send(sctx, c)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		k, _ := domain.Key(id)
		keys = append(keys, k)
	}
	testenv.Eventually(t, 10*time.Second, "the view loads the bucket", v.Loaded)
	return "http://" + ln.Addr().String(), keys
}

// startPrism runs Prism's validating proxy in front of upstream and returns its address.
func startPrism(t *testing.T, prism, upstream string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(prism, "proxy", "openapi.json", upstream, "--errors", "--host", "127.0.0.1", "--port", port)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://127.0.0.1:" + port
	testenv.Eventually(t, 90*time.Second, "Prism listens", func() bool {
		resp, err := http.Get(base + "/api/v1/openapi.json")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil // any answer: Prism listens
	})
	return base
}

// pageTokenOf is a real page token of the view (of a walk filtered by state).
func pageTokenOf(t *testing.T, upstream string) string {
	req, _ := http.NewRequest(http.MethodGet, upstream+"/api/v1/entities?pageSize=1&state=Pending", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l web.EntityList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || l.NextPageToken == "" {
		t.Fatalf("a page token: %v %+v", err, l)
	}
	return l.NextPageToken
}

func fuzzGet(t *testing.T, u string, header map[string]string) (int, string, string) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), resp.Header.Get("sl-violations")
}

// generator makes the requests of the fuzz.
type generator struct {
	r     *rand.Rand
	keys  []string
	token string
}

func (g *generator) pick(vs ...string) string { return vs[g.r.IntN(len(vs))] }

// garbage is a value no parameter takes.
func (g *generator) garbage() string {
	b := make([]byte, 1+g.r.IntN(40))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return g.pick("", " ", "-1", "0", "1e9", "99999999999999999999", "null", "true", "🙂", "' OR 1=1 --", "../..",
		"%2F", strings.Repeat("a", 1500), "2026-13-45T99:99:99Z", base64.RawURLEncoding.EncodeToString(b),
		// Prism resets the connection on a percent-encoded path that is not UTF-8.
		strings.ToValidUTF8(string(b), "?"))
}

// query sets each parameter, or not, to a value from its pool or to garbage.
func (g *generator) query(pools map[string][]string) string {
	q := url.Values{}
	for name, pool := range pools {
		switch g.r.IntN(4) {
		case 0:
		case 1:
			q.Set(name, g.garbage())
		default:
			q.Set(name, g.pick(pool...))
		}
	}
	if s := q.Encode(); s != "" {
		return "?" + s
	}
	return ""
}

func (g *generator) page() map[string][]string {
	return map[string][]string{"pageSize": {"0", "1", "2", "100", "1000", "1001", "-3"},
		"pageToken": {g.token, g.token + "x", base64.RawURLEncoding.EncodeToString([]byte(g.keys[0]))}}
}

func (g *generator) key() string {
	if g.r.IntN(4) == 0 {
		return url.PathEscape(g.garbage())
	}
	return url.PathEscape(g.pick(g.keys...) + g.pick("", "", "x", "/"))
}

// auth adds the credentials of one caller or another: the operator, a customer, none, or a
// token the view does not know.
func (g *generator) auth(h map[string]string) map[string]string {
	if h == nil {
		h = map[string]string{}
	}
	switch n := g.r.IntN(20); {
	case n < 12:
		h["Authorization"] = "Bearer " + operatorToken
	case n < 17:
		h["Authorization"] = "Bearer " + customerToken
	case n < 19:
		h["Authorization"] = "Bearer " + strings.ToValidUTF8(g.pick("x", operatorToken+"x", "0123456789abcdef0123"), "")
	}
	return h
}

// op makes one request of an operation: its path and query, its headers, and false when it
// is not to be sent through Prism.
type op func() (string, map[string]string, bool)

func (g *generator) operations() []op {
	times := []string{time.Now().UTC().Format(time.RFC3339), time.Now().Add(72 * time.Hour).UTC().Format(time.RFC3339Nano), "2026-01-02T03:04:05+02:00"}
	filters := g.page()
	for name, pool := range map[string][]string{
		"state":             {"Pending", "pending", "Planned", "None", "CustomerActionNeeded", "customer_action_needed", "Bogus"},
		"prefix":            {"/subscriptions/s1", "/SUBSCRIPTIONS/s0/resourceGroups/RG-1", "/", "subscriptions", "/subscriptions/s1/../s0"},
		"updating":          {"true", "false", "1", "maybe"},
		"windowStartBefore": times, "windowStartAfter": times,
	} {
		filters[name] = pool
	}
	return []op{
		func() (string, map[string]string, bool) { return "/api/v1/entities" + g.query(filters), nil, true },
		func() (string, map[string]string, bool) {
			h := map[string]string{}
			if g.r.IntN(2) == 0 {
				h["If-None-Match"] = g.pick(`"1"`, `"2"`, `W/"1"`, "*", "garbage")
			}
			return "/api/v1/entities/" + g.key(), h, true
		},
		func() (string, map[string]string, bool) {
			return "/api/v1/entities/" + g.key() + "/history" + g.query(g.page()), nil, true
		},
		func() (string, map[string]string, bool) {
			return "/api/v1/entities/" + g.key() + "/notices" + g.query(g.page()), nil, true
		},
		func() (string, map[string]string, bool) { return "/api/v1/policies" + g.query(g.page()), nil, true },
		func() (string, map[string]string, bool) { return "/api/v1/campaigns" + g.query(g.page()), nil, true },
		func() (string, map[string]string, bool) {
			return "/api/v1/campaigns/" + url.PathEscape(g.pick("c-1", "campaign", g.garbage())), nil, true
		},
		g.events,
		func() (string, map[string]string, bool) { return "/api/v1/openapi.json", nil, true },
	}
}

// events is a request to the feed that the API refuses: a valid one is a stream without end.
func (g *generator) events() (string, map[string]string, bool) {
	if g.r.IntN(2) == 0 {
		since := g.garbage()
		if _, err := time.Parse(time.RFC3339Nano, since); err == nil || since == "" {
			return "", nil, false
		}
		return "/api/v1/events?" + url.Values{"since": {since}}.Encode(), nil, true
	}
	id := g.pick("e1:2.", "n0:1.", "", "e3:9.AAAA") + g.pick("!", "zz", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "~~")
	return "/api/v1/events", map[string]string{"Last-Event-ID": id}, true
}
