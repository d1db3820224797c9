package webhook_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maintsignals/functions/webhook"
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// The endpoint is down for 30 s (15 s answering 503, 15 s refusing connections), then back:
// nothing is lost, each cluster's events arrive in order, and every retry of an event carries
// the same webhook-id (with a fresh timestamp and signature).
func TestWebhook_EndpointDownThirtySecondsThenBack(t *testing.T) {
	env := testenv.Start(t)
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, func(delivery, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: rc}
	go func() { _ = srv.Serve(ln) }()
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("down", "http://"+addr+"/hook")},
		Backoff: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}})

	want := map[string][]string{}
	n := 0
	for round := 0; round < 6; round++ {
		for c := 0; c < 5; c++ {
			n++
			want[cluster(c)] = append(want[cluster(c)], publishEvent(t, env.JS, cluster(c), n, domain.StatePending))
		}
	}
	time.Sleep(15 * time.Second)
	_ = srv.Close() // connections refused from here on
	refusedFrom := len(rc.requests())
	time.Sleep(15 * time.Second)
	down.Store(false)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv = &http.Server{Handler: rc}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	testenv.Eventually(t, 20*time.Second, "every event delivered after the outage", func() bool { return len(rc.succeeded()) == n })
	inOrder(t, rc.succeeded(), want)
	reqs := rc.requests()
	if refusedFrom < 5*3 {
		t.Fatalf("%d requests while answering 503: want several retries per cluster", refusedFrom)
	}
	// Retries of one event: same id, later timestamps, each signature verified on receipt.
	first := reqs[0].id
	var retries []delivery
	for _, d := range reqs {
		if d.id == first {
			retries = append(retries, d)
		}
	}
	if len(retries) < 3 {
		t.Fatalf("event %s was tried %d times, want several", first, len(retries))
	}
	if retries[len(retries)-1].ts <= retries[0].ts {
		t.Fatalf("timestamps of retries did not move: %d … %d", retries[0].ts, retries[len(retries)-1].ts)
	}
}

// Timeouts, connection resets, 408, 429 and 5xx are retried with backoff until the endpoint
// takes the event; the same id every time; the other clusters are unaffected.
func TestWebhook_RetryableFailuresAreRetriedWithBackoff(t *testing.T) {
	env := testenv.Start(t)
	failures := map[string]func(w http.ResponseWriter) int{
		cluster(0): func(http.ResponseWriter) int { return http.StatusInternalServerError },
		cluster(1): func(http.ResponseWriter) int { return http.StatusBadGateway },
		cluster(2): func(http.ResponseWriter) int { return http.StatusRequestTimeout },
		cluster(3): func(http.ResponseWriter) int { return http.StatusTooManyRequests },
		cluster(4): func(http.ResponseWriter) int { time.Sleep(1500 * time.Millisecond); return 0 }, // past the timeout: no answer
		cluster(5): func(w http.ResponseWriter) int { // connection reset
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0)
				_ = conn.Close()
			}
			return 0
		},
	}
	rc := newReceiver(t, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serveWith(w, r, func(d delivery, attempt int) int {
			if attempt <= 2 {
				return failures[d.subject](w)
			}
			return http.StatusOK
		})
	}))
	t.Cleanup(srv.Close)
	backoff := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("retry", srv.URL)}, Backoff: backoff, Timeout: time.Second})
	ids := map[string]string{}
	for c := 0; c < 6; c++ {
		ids[cluster(c)] = publishEvent(t, env.JS, cluster(c), c, domain.StatePending)
	}
	testenv.Eventually(t, 30*time.Second, "every event delivered", func() bool { return len(rc.succeeded()) == 6 })
	for c := 0; c < 6; c++ {
		var at []time.Time
		for _, d := range rc.requests() {
			if d.subject == cluster(c) {
				if d.id != ids[cluster(c)] {
					t.Fatalf("cluster %d: id %s, want %s", c, d.id, ids[cluster(c)])
				}
				at = append(at, d.at)
			}
		}
		if len(at) != 3 {
			t.Fatalf("cluster %d: %d attempts, want 3 (two failures, then success)", c, len(at))
		}
		// The second retry waits at least the second backoff step (after a timeout, from its end).
		if gap := at[2].Sub(at[1]); gap < backoff[1] {
			t.Fatalf("cluster %d: retried after %s, want at least %s", c, gap, backoff[1])
		}
	}
}

// Other 4xx answers are dead-lettered for that subscription, do not hold back the events after
// them, show in the dead-letter list and are sent again by a replay, with the same id.
func TestWebhook_ClientErrorsAreDeadLetteredThenReplayed(t *testing.T) {
	env := testenv.Start(t)
	var refuse atomic.Bool
	refuse.Store(true)
	rc := newReceiver(t, func(d delivery, _ int) int {
		if refuse.Load() && strings.HasSuffix(d.id, ":2") {
			return http.StatusGone
		}
		if refuse.Load() && strings.HasSuffix(d.id, ":3") {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	other := newReceiver(t, nil)
	srv, srvOther := httptest.NewServer(rc), httptest.NewServer(other)
	t.Cleanup(srv.Close)
	t.Cleanup(srvOther.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("strict", srv.URL), sub("other", srvOther.URL)}})
	var ids []string
	for n := 1; n <= 4; n++ {
		ids = append(ids, publishEvent(t, env.JS, cluster(1), n, domain.StatePending))
	}
	testenv.Eventually(t, 10*time.Second, "events 1 and 4 delivered past the refused ones", func() bool { return len(rc.succeeded()) == 2 })
	if got := rc.succeeded(); got[0].id != ids[0] || got[1].id != ids[3] {
		t.Fatalf("delivered %v", got)
	}
	if n := len(rc.requests()); n != 4 {
		t.Fatalf("%d requests, want 4: a refusal is not retried", n)
	}
	testenv.Eventually(t, 5*time.Second, "the other subscription gets all four", func() bool { return len(other.succeeded()) == 4 })

	var letters []dlq.Letter
	testenv.Eventually(t, 5*time.Second, "two dead letters", func() bool {
		var err error
		letters, err = dlq.List(context.Background(), env.JS)
		return err == nil && len(letters) == 2
	})
	for i, l := range letters {
		if l.Subscription != "strict" || l.CommandID != ids[i+1] || l.Key != domain.MustKey(cluster(1)) {
			t.Fatalf("dead letter %+v", l)
		}
	}
	if !strings.Contains(letters[0].Reason, "HTTP 410") || !strings.Contains(letters[1].Reason, "HTTP 400") {
		t.Fatalf("reasons %q, %q", letters[0].Reason, letters[1].Reason)
	}
	refuse.Store(false)
	for _, l := range letters {
		if _, err := dlq.Replay(context.Background(), env.JS, l.Seq); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "both replayed deliveries accepted", func() bool { return len(rc.succeeded()) == 4 })
	if got := rc.succeeded(); got[2].id != ids[1] || got[3].id != ids[2] {
		t.Fatalf("replayed %s, %s; want %s, %s", got[2].id, got[3].id, ids[1], ids[2])
	}
	if left, _ := dlq.List(context.Background(), env.JS); len(left) != 0 {
		t.Fatalf("dead letters left after replay: %+v", left)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(other.requests()); n != 4 {
		t.Fatalf("the other subscription got %d requests: a replay is for its subscription only", n)
	}
}

// A slow endpoint (10 s per request) does not delay another subscription.
func TestWebhook_SlowEndpointDoesNotDelayOtherSubscriptions(t *testing.T) {
	env := testenv.Start(t)
	slow := newReceiver(t, nil)
	srvSlow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slow.serveWith(w, r, func(delivery, int) int {
			select {
			case <-time.After(10 * time.Second):
				return http.StatusOK
			case <-r.Context().Done(): // the test is over
				return 0
			}
		})
	}))
	fast := newReceiver(t, nil)
	srvFast := httptest.NewServer(fast)
	t.Cleanup(srvFast.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("slow", srvSlow.URL), sub("fast", srvFast.URL)}, Timeout: 15 * time.Second, DrainTimeout: time.Second})
	t0 := time.Now()
	for n := 0; n < 20; n++ {
		publishEvent(t, env.JS, cluster(1), n, domain.StatePending) // one cluster: the slow one goes one at a time
	}
	// Within the slow endpoint's first answer (10 s), with room for a busy machine.
	testenv.Eventually(t, 8*time.Second, "the fast subscription has every event", func() bool { return len(fast.succeeded()) == 20 })
	if took := time.Since(t0); took > 8*time.Second {
		t.Fatalf("fast subscription took %s", took)
	}
	if n := len(slow.requests()); n > 1 {
		t.Fatalf("slow endpoint got %d requests in that time", n)
	}
	srvSlow.CloseClientConnections()
	srvSlow.Close()
}

// One cluster's retries do not delay the other clusters of the same subscription; when its
// endpoint accepts again, its events arrive in order.
func TestWebhook_OneClusterRetriesDoNotDelayOtherClusters(t *testing.T) {
	env := testenv.Start(t)
	var failing atomic.Bool
	failing.Store(true)
	rc := newReceiver(t, func(d delivery, _ int) int {
		if failing.Load() && d.subject == cluster(0) {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("mixed", srv.URL)}})
	want := map[string][]string{}
	n := 0
	for round := 0; round < 5; round++ {
		for c := 0; c < 8; c++ {
			n++
			want[cluster(c)] = append(want[cluster(c)], publishEvent(t, env.JS, cluster(c), n, domain.StatePending))
		}
	}
	testenv.Eventually(t, 5*time.Second, "the seven healthy clusters delivered", func() bool { return len(rc.succeeded()) == 35 })
	failing.Store(false)
	testenv.Eventually(t, 10*time.Second, "the failing cluster delivered", func() bool { return len(rc.succeeded()) == 40 })
	inOrder(t, rc.succeeded(), want)
}

// The webhook function restarts mid-stream: a receiver that de-duplicates by webhook-id sees
// every event exactly once, and each cluster's in order.
func TestWebhook_RestartMidStreamLosesNothing(t *testing.T) {
	env := testenv.Start(t)
	rc := newReceiver(t, func(delivery, int) int { time.Sleep(20 * time.Millisecond); return http.StatusOK })
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	// Fewer in hand than the backlog: a stop delivers what it holds, the rest waits for the
	// next start.
	cfg := webhook.Config{Subscriptions: []webhook.Subscription{sub("restart", srv.URL)}, InFlight: 40, DrainTimeout: 100 * time.Millisecond}
	stop := start(t, env, cfg)
	want := map[string][]string{}
	const total = 600
	for n := 0; n < total; n++ {
		c := cluster(n % 10)
		want[c] = append(want[c], publishEvent(t, env.JS, c, n, domain.StatePending))
	}
	testenv.Eventually(t, 20*time.Second, "some deliveries", func() bool { return len(rc.requests()) > 100 })
	stop()
	mid := len(rc.succeeded())
	start(t, env, cfg)
	testenv.Eventually(t, 30*time.Second, "every event after the restart", func() bool { return len(rc.succeeded()) == total })
	inOrder(t, rc.succeeded(), want)
	t.Logf("%d delivered before the restart, %d requests in all for %d events", mid, len(rc.requests()), total)
	if mid == total {
		t.Fatalf("the restart came after the last delivery: nothing was tested")
	}
}

// HTTPS endpoints are verified: against the subscription's CA file, and refused (retried, not
// delivered) without it.
func TestWebhook_HTTPSWithCAFile(t *testing.T) {
	env := testenv.Start(t)
	rc := newReceiver(t, nil)
	srv := httptest.NewTLSServer(rc)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	cert := srv.Certificate()
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, untrusted := sub("tls", srv.URL), sub("untrusted", srv.URL+"/p?token=s3cr3t")
	trusted.CAFile = ca
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{trusted, untrusted}, DrainTimeout: 200 * time.Millisecond})
	id := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "delivered over HTTPS", func() bool { return len(rc.succeeded()) == 1 })
	time.Sleep(time.Second)
	if got := rc.requests(); len(got) != 1 || got[0].id != id {
		t.Fatalf("requests %v: the subscription without the CA must not get through", got)
	}
}

// A redirect is not followed (a signed body goes only where the subscription says): it is
// dead-lettered like any other refusal, and the next event goes out.
func TestWebhook_RedirectIsNotFollowed(t *testing.T) {
	env := testenv.Start(t)
	elsewhere := newReceiver(t, nil)
	srvElsewhere := httptest.NewServer(elsewhere)
	t.Cleanup(srvElsewhere.Close)
	var first atomic.Bool
	first.Store(true)
	rc := newReceiver(t, func(d delivery, _ int) int {
		if first.CompareAndSwap(true, false) {
			return http.StatusTemporaryRedirect
		}
		return http.StatusOK
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", srvElsewhere.URL)
		rc.serveWith(w, r, rc.answer)
	}))
	t.Cleanup(srv.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("redirected", srv.URL)}})
	publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	second := publishEvent(t, env.JS, cluster(1), 2, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the second event delivered", func() bool { return len(rc.succeeded()) == 1 })
	if got := rc.succeeded()[0].id; got != second {
		t.Fatalf("delivered %s, want %s", got, second)
	}
	var letters []dlq.Letter
	testenv.Eventually(t, 5*time.Second, "the redirected delivery dead-lettered", func() bool {
		letters, _ = dlq.List(context.Background(), env.JS)
		return len(letters) == 1
	})
	if !strings.Contains(letters[0].Reason, "HTTP 307") || letters[0].Subscription != "redirected" {
		t.Fatalf("dead letter %+v", letters[0])
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// A delivery still failing when its retries are spent (RetryFor, 25 h by default) is
// dead-lettered for its subscription with the reason, and the entity's next event goes out.
func TestWebhook_RetriesSpentAreDeadLettered(t *testing.T) {
	env := testenv.Start(t)
	rc := newReceiver(t, func(d delivery, _ int) int {
		if strings.HasSuffix(d.id, ":1") {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	start(t, env, webhook.Config{Subscriptions: []webhook.Subscription{sub("budget", srv.URL)},
		Backoff: []time.Duration{100 * time.Millisecond}, RetryFor: 450 * time.Millisecond})
	first := publishEvent(t, env.JS, cluster(1), 1, domain.StatePending)
	second := publishEvent(t, env.JS, cluster(1), 2, domain.StatePending)
	testenv.Eventually(t, 10*time.Second, "the next event delivered after the retries ran out", func() bool { return len(rc.succeeded()) == 1 })
	tries := 0
	for _, d := range rc.requests() {
		if d.id == first {
			tries++
		}
	}
	want := webhook.Attempts([]time.Duration{100 * time.Millisecond}, 450*time.Millisecond)
	if rc.succeeded()[0].id != second || tries != want {
		t.Fatalf("first event tried %d times (want %d), then delivered %s", tries, want, rc.succeeded()[0].id)
	}
	var letters []dlq.Letter
	testenv.Eventually(t, 5*time.Second, "the dead letter", func() bool {
		letters, _ = dlq.List(context.Background(), env.JS)
		return len(letters) == 1
	})
	if l := letters[0]; l.Subscription != "budget" || l.CommandID != first || !strings.Contains(l.Reason, "gave up after") || !strings.Contains(l.Reason, "HTTP 503") {
		t.Fatalf("dead letter %+v", l)
	}
}
