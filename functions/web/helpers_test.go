package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/command"
	"maintsignals/functions/web"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

var quiet = testenv.Quiet()

// stack is a real stack for the view: an embedded, provisioned server, the command function,
// and the view serving on a loopback port.
type stack struct {
	env  *testenv.Env
	cl   *client.Client
	view *web.View
	url  string
}

// startStack starts the stack; cfg configures the view (its address is a free loopback port).
func startStack(t testing.TB, cfg web.Config) *stack {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- command.Run(ctx, env.JS, command.Config{Log: quiet}) }()
	cl, err := client.New(testenv.Connect(t, env.Server), quiet)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{env: env, cl: cl}
	s.view, s.url = serve(t, ctx, env.JS, cfg, done)
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopped with %v", err)
			}
		}
	})
	testenv.Eventually(t, 10*time.Second, "the view loads the bucket", s.view.Loaded)
	return s
}

// serve runs a view on a free loopback port; its result goes to done.
func serve(t testing.TB, ctx context.Context, js jetstream.JetStream, cfg web.Config, done chan<- error) (*web.View, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	cfg.Listener = ln
	if cfg.Retry == 0 {
		cfg.Retry = 100 * time.Millisecond
	}
	v, err := web.New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- v.Serve(ctx, ln) }()
	return v, "http://" + ln.Addr().String()
}

// send sends a command and waits for its outcome.
func (s *stack) send(t testing.TB, id string, task domain.Task, with func(*domain.Command)) {
	t.Helper()
	c := domain.Command{ID: client.NewCommandID("test"), ResourceID: id, Task: task, Actor: "test"}
	if with != nil {
		with(&c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := s.cl.Send(ctx, c); err != nil {
		t.Fatalf("%s %s: %v", task, id, err)
	}
}

// withWindow announces a window.
func withWindow(start time.Time, d time.Duration) func(*domain.Command) {
	return func(c *domain.Command) {
		c.Window = &domain.Window{Start: start.UTC(), End: start.Add(d).UTC()}
		c.Reason = "test window"
	}
}

// get fetches path with an Accept header and returns the status and body.
func get(t testing.TB, url, accept string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// getJSON fetches path as JSON into v and returns the status.
func getJSON(t testing.TB, url string, v any, header ...string) int {
	t.Helper()
	code, b := get(t, url, "application/json", header...)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %d %q: %v", url, code, b, err)
	}
	return code
}

// fleet is the fleet page's JSON.
func (s *stack) fleet(t testing.TB, query string) web.FleetPage {
	t.Helper()
	var p web.FleetPage
	if code := getJSON(t, s.url+"/"+query, &p); code != http.StatusOK {
		t.Fatalf("fleet page %q: %d", query, code)
	}
	return p
}

// events reads a page's server-sent events as its script does, from the count of changes a
// page rendered now carries (the fleet page's), and sends the name of each on the channel;
// header is sent with both requests (name, value, …).
func events(t testing.TB, ctx context.Context, url string, header ...string) <-chan string {
	t.Helper()
	root, _, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	_, page := get(t, "http://"+root+"/", "text/html", header...)
	m := regexp.MustCompile(`data-seq="(\d+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatal("the fleet page is not live")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?since="+string(m[1]), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("event stream of %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				out <- name
			}
		}
	}()
	return out
}

// within waits for an event named name on ch.
func within(t testing.TB, ch <-chan string, name string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatalf("the event stream ended before %q", name)
			}
			if got == name {
				return
			}
		case <-deadline:
			t.Fatalf("no %q event within %s", name, d)
		}
	}
}

func rid(sub, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/%s", sub, name)
}

// writeFile writes body to a file of the test's and returns its path.
func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// bearer is the header that carries token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }
