package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
)

// sse is one server-sent event.
type sse struct{ id, event, data string }

// feed opens the API's event stream (header: name, value, …) and sends its events on the
// channel until ctx ends; the document's schema judges each event's data.
func feed(t testing.TB, ctx context.Context, j *judge, url string, header ...string) <-chan sse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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
	if err := j.validate(req, resp, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the feed: %d: %v", resp.StatusCode, err)
	}
	out := make(chan sse)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != "" {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sse{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// take reads n events of the feed, each an outcome event as the document describes it.
func take(t testing.TB, j *judge, ch <-chan sse, n int) []sse {
	t.Helper()
	schema := j.Doc.Components.Schemas["Event"].Value
	var out []sse
	deadline := time.After(15 * time.Second) // a bound on a hang, not a measure
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the feed ended after %d events", len(out))
			}
			var v any
			if err := json.Unmarshal([]byte(ev.data), &v); err != nil || ev.event != "outcome" {
				t.Fatalf("event %+v: %v", ev, err)
			}
			if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("event %s: not an Event of the document: %v", ev.data, err)
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("%d events of %d came", len(out), n)
		}
	}
	return out
}

// commandOf is the command id of an outcome event's data.
func commandOf(t testing.TB, ev sse) string {
	t.Helper()
	var e domain.Event
	if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
		t.Fatal(err)
	}
	return e.CommandID
}

// A client that loses the feed and comes back with the id of the last event it read gets
// every event after it, of every cell's stream, once.
func TestAPI_EventsResumeWithLastEventIDAcrossCells(t *testing.T) {
	s := startStack(t, web.Config{})
	j := newJudge(t)
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	var want []string
	sendSome := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("api-feed-%d", i)
			s.send(t, rid("s1", fmt.Sprintf("feed%d", i)), domain.TaskCustomerActionNeeded, func(c *domain.Command) { c.ID = id })
			want = append(want, id)
		}
	}
	sendSome(0, 8)
	ctx, cancel := context.WithCancel(context.Background())
	first := take(t, j, feed(t, ctx, j, s.url+"/api/v1/events?since="+since), 3)
	cancel() // the connection drops mid-stream
	sendSome(8, 16)
	if !regexp.MustCompile(`^e[0-7]:\d+\.[A-Za-z0-9_-]+$`).MatchString(first[2].id) {
		t.Errorf("event id %q", first[2].id)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	rest := take(t, j, feed(t, ctx2, j, s.url+"/api/v1/events?since="+time.Now().UTC().Format(time.RFC3339), "Last-Event-ID", first[2].id), len(want)-3)
	seen := map[string]int{}
	for _, ev := range append(first, rest...) {
		seen[commandOf(t, ev)]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("command %s came %d times", id, seen[id])
		}
	}
	cells := map[string]bool{}
	for _, ev := range rest {
		cells[ev.id[:2]] = true
	}
	if len(cells) < 2 {
		t.Errorf("the events came from %d cells' streams: the test shows nothing of the resume across cells", len(cells))
	}
	// From the last id, the next event is the next command's: nothing repeats.
	tail := feed(t, ctx2, j, s.url+"/api/v1/events", "Last-Event-ID", rest[len(rest)-1].id)
	sendSome(16, 17)
	if next := take(t, j, tail, 1); commandOf(t, next[0]) != want[16] {
		t.Errorf("after the last event came %s, want %s", next[0].data, want[16])
	}
}

// A customer's feed carries the events of its scopes alone.
func TestAPI_EventsOfACustomerAreOfItsScopes(t *testing.T) {
	s := startTenants(t, web.Config{})
	j := newJudge(t)
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	mine, theirs := rid("s1", "a"), rid("s10", "b")
	s.send(t, theirs, domain.TaskCustomerActionNeeded, func(c *domain.Command) { c.ID = "theirs-1" })
	s.send(t, mine, domain.TaskCustomerActionNeeded, func(c *domain.Command) { c.ID = "mine-1" })
	s.send(t, ridIn("S2", "RG-1", "c"), domain.TaskCustomerActionNeeded, func(c *domain.Command) { c.ID = "theirs-2" })
	s.send(t, mine, domain.TaskNone, func(c *domain.Command) { c.ID = "mine-2" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := feed(t, ctx, j, s.url+"/api/v1/events?since="+since, bearer(contosoToken)...)
	var got []string
	for _, ev := range take(t, j, ch, 2) {
		got = append(got, commandOf(t, ev))
	}
	if strings.Join(got, " ") != "mine-1 mine-2" {
		t.Errorf("the customer's feed: %v, want its own two commands", got)
	}
}
