package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/webhook"
	"maintsignals/shared/domain"
)

// benchWebhook measures the webhook function delivering n stored events over keys entities to a
// local receiver, next to the raw rate of the same HTTP client posting the same bodies from as
// many workers as the function delivers at once. Returns the ratio ours / raw.
func benchWebhook(ctx context.Context, js jetstream.JetStream, n, keys int, out io.Writer) (float64, error) {
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	var target atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
		if got.Add(1) == target.Load() {
			once.Do(func() { close(done) })
		}
	}))
	defer rcv.Close()
	subs, err := webhook.Parse([]byte(fmt.Sprintf(`[{"name":"bench","url":%q,"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]`, rcv.URL)))
	if err != nil {
		return 0, err
	}

	// The events, stored before the function starts, and in the webhook feed.
	bodies := make([][]byte, n)
	for i := range n {
		res := fmt.Sprintf("/subscriptions/bench/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/wh%d", i%keys)
		ev := domain.Event{CommandID: fmt.Sprintf("wh-%d", i), ResourceID: res, Task: domain.TaskPending, Outcome: domain.OutcomeApplied,
			From: domain.StateNone, To: domain.StatePending, At: time.Now(), CommandSeq: uint64(i + 1)}
		b, _ := domain.EncodeEvent(ev)
		bodies[i] = b
		m := nats.NewMsg(domain.EventSubject(domain.MustKey(res)))
		m.Data = b
		id := fmt.Sprintf("wh-%d:%d", i, i+1)
		m.Header.Set(domain.HeaderMsgID, id)
		domain.SetCloudEventHeaders(m.Header, domain.CETypeApplied, id, res, ev.At)
		if _, err := js.PublishMsgAsync(m); err != nil {
			return 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return 0, errors.New("publishing the events timed out")
	}
	feed, err := js.Stream(ctx, domain.WebhookStream)
	if err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		info, err := feed.Info(ctx)
		if err == nil && info.State.Msgs >= uint64(n) {
			break
		}
		if time.Now().After(deadline) {
			return 0, errors.New("the webhook feed did not source the events")
		}
	}

	// Raw: the same client, the same bodies, as many at once as the function runs.
	client := webhook.HTTPClient(&subs[0], 15*time.Second)
	workers := webhook.DefaultConcurrency
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	var rawErr atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				resp, err := client.Post(rcv.URL, "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					rawErr.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	raw := float64(n) / time.Since(start).Seconds()
	if err, _ := rawErr.Load().(error); err != nil {
		return 0, fmt.Errorf("raw posts: %w", err)
	}

	// Ours: the function starts with the events waiting and delivers every one.
	got.Store(0)
	target.Store(int64(n))
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start = time.Now()
	go func() { errc <- webhook.Run(wctx, js, webhook.Config{Subscriptions: subs, FromStart: true}) }()
	select {
	case <-done:
	case err := <-errc:
		cancel()
		return 0, fmt.Errorf("webhook function: %w", err)
	case <-time.After(5 * time.Minute):
		cancel()
		return 0, fmt.Errorf("webhook function: %d of %d delivered in 5 min", got.Load(), n)
	}
	ours := float64(n) / time.Since(start).Seconds()
	cancel()
	if err := <-errc; err != nil {
		return 0, err
	}
	fmt.Fprintf(out, "webhook, %d events over %d entities to a local receiver: %.0f deliveries/s (signed CloudEvents, in order per entity); same HTTP client posting the same bodies, %d at once: %.0f posts/s\n",
		n, keys, ours, workers, raw)
	return ours / raw, nil
}
