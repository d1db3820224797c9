package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/functions/web"
	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// cuttable is an HTTP client whose connections a test can cut.
type cuttable struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *cuttable) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}}}
}

// cut closes every connection made so far.
func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func TestClient_WalksEveryPageAndResumesTheFeedAfterADroppedConnection(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	go func() { done <- command.Run(ctx, env.JS, command.Config{Log: testenv.Quiet()}) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v, err := web.New(env.JS, web.Config{Listener: ln, Logger: testenv.Quiet(), Retry: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- v.Serve(ctx, ln) }()
	cl, err := client.New(testenv.Connect(t, env.Server), testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	var sent []string
	send := func(i int) {
		id := fmt.Sprintf("apiclient-%d", i)
		sctx, stop := context.WithTimeout(ctx, 15*time.Second)
		defer stop()
		c := domain.Command{ID: id, ResourceID: fmt.Sprintf("/subscriptions/s1/resourceGroups/rg-1/providers/p/c/e%02d", i),
			Task: domain.TaskCustomerActionNeeded, Actor: "test"}
		if _, err := cl.Send(sctx, c); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, id)
	}
	for i := range 7 {
		send(i)
	}
	testenv.Eventually(t, 10*time.Second, "the view loads the bucket", v.Loaded)
	var cut cuttable
	c := &Client{Base: "http://" + ln.Addr().String(), HTTP: cut.client()}

	testenv.Eventually(t, 5*time.Second, "every entity in the view", func() bool {
		var got []string
		err := c.Walk(ctx, url.Values{"state": {"customeractionneeded"}}, 2, func(e Entity) { got = append(got, e.ResourceID) })
		return err == nil && len(got) == 7 && slices.IsSorted(got)
	})

	events := make(chan Event)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Follow(fctx, since, func(e Event) { events <- e }) }()
	got := map[string]int{}
	read := func(n int) {
		for range n {
			select {
			case e := <-events:
				var ev domain.Event
				if err := json.Unmarshal(e.Data, &ev); err != nil {
					t.Fatal(err)
				}
				got[ev.CommandID]++
			case <-time.After(20 * time.Second): // a bound on a hang, not a measure
				t.Fatalf("%d events came of %d", len(got), len(sent))
			}
		}
	}
	read(7)
	cut.cut() // the connection drops; the client comes back with the last id it read
	for i := 7; i < 12; i++ {
		send(i)
	}
	read(5)
	for _, id := range sent {
		if got[id] != 1 {
			t.Errorf("%s came %d times", id, got[id])
		}
	}
}
