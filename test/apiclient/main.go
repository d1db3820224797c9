// Command apiclient is an example client of the read API (/api/v1): it walks every page of
// the entities a filter selects, then, with -follow, follows the feed of outcome events and
// notices, and after a dropped connection resumes from the id of the last event it read.
//
//	go run ./test/apiclient -url http://127.0.0.1:8080 -state pending -follow
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"
)

// Client reads the API at Base (e.g. http://127.0.0.1:8080) with Token, if any.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// Entity is the part of a record this example prints.
type Entity struct {
	ResourceID string `json:"resourceId"`
	State      string `json:"state"`
	Updating   bool   `json:"updating"`
}

// Problem is an RFC 9457 problem detail of the API.
type Problem struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Type, p.Detail) }

func (c *Client) get(ctx context.Context, path string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		p := &Problem{Status: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(p)
		return nil, p
	}
	return resp, nil
}

// Walk calls fn with every entity filter selects, page after page, pageSize at a time.
func (c *Client) Walk(ctx context.Context, filter url.Values, pageSize int, fn func(Entity)) error {
	q := url.Values{}
	for k, v := range filter {
		q[k] = v
	}
	q.Set("pageSize", fmt.Sprint(pageSize))
	for {
		resp, err := c.get(ctx, "/api/v1/entities?"+q.Encode(), nil)
		if err != nil {
			return fmt.Errorf("entities: %w", err)
		}
		var page struct {
			Items         []Entity `json:"items"`
			NextPageToken string   `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("entities: %w", err)
		}
		for _, e := range page.Items {
			fn(e)
		}
		if page.NextPageToken == "" {
			return nil
		}
		q.Set("pageToken", page.NextPageToken) // the same filter: the token is bound to it
	}
}

// Event is one event of the feed.
type Event struct {
	ID, Kind string
	Data     json.RawMessage
}

// Follow calls fn with every event of the feed stored since then (zero: from now) until ctx
// ends, reconnecting after a dropped connection with the id of the last event fn got: nothing
// is missed or repeated across the reconnects.
func (c *Client) Follow(ctx context.Context, since time.Time, fn func(Event)) error {
	lastID := ""
	for {
		id, err := c.followOnce(ctx, since, lastID, fn)
		lastID = id
		var p *Problem
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &p):
			return err // the API refused: trying again changes nothing
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// followOnce reads the feed on one connection and returns the id of the last event read.
func (c *Client) followOnce(ctx context.Context, since time.Time, lastID string, fn func(Event)) (string, error) {
	h := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID) // it wins over since
	}
	path := "/api/v1/events"
	if !since.IsZero() {
		path += "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano))
	}
	resp, err := c.get(ctx, path, h)
	if err != nil {
		return lastID, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && ev.ID != "":
			fn(ev)
			lastID, ev = ev.ID, Event{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = json.RawMessage(line[6:])
		}
	}
	if err := sc.Err(); err != nil {
		return lastID, err
	}
	return lastID, io.ErrUnexpectedEOF
}

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "the web view's address")
	state := flag.String("state", "", "only entities in this state")
	prefix := flag.String("prefix", "", "only entities under this resource-ID prefix")
	size := flag.Int("page-size", 100, "entities per page")
	follow := flag.Bool("follow", false, "then follow the feed of outcome events and notices")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := &Client{Base: strings.TrimRight(*base, "/"), Token: os.Getenv("MAINT_WEB_TOKEN"), HTTP: http.DefaultClient}
	filter := url.Values{}
	if *state != "" {
		filter.Set("state", *state)
	}
	if *prefix != "" {
		filter.Set("prefix", *prefix)
	}
	n := 0
	err := c.Walk(ctx, filter, *size, func(e Entity) {
		n++
		fmt.Printf("%-22s updating=%-5v %s\n", e.State, e.Updating, e.ResourceID)
	})
	if err == nil {
		fmt.Fprintf(os.Stderr, "%d entities\n", n)
		if *follow {
			err = c.Follow(ctx, time.Time{}, func(e Event) { fmt.Printf("%s %s %s\n", e.ID, e.Kind, e.Data) })
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiclient:", err)
		os.Exit(1)
	}
}
