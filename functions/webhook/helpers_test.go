package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"maintsignals/functions/webhook"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // 24 bytes of base64

// delivery is one request a receiver got, checked with the two reference libraries.
type delivery struct {
	id, ceType, subject string
	ts                  int64
	body                []byte
	at                  time.Time
	done                time.Time
	status              int // what the receiver answered; 0 until then (or when it cut the connection)
}

// receiver is an integrator's endpoint: it rebuilds each request as a CloudEvent with the
// CloudEvents SDK's HTTP binding and verifies its signature with the Standard Webhooks
// reference library; answer decides the status of each request (nil: 204).
type receiver struct {
	t      *testing.T
	wh     *standardwebhooks.Webhook
	mu     sync.Mutex
	all    []delivery // every request, retries included
	answer func(d delivery, attempt int) int
	tries  map[string]int
}

func newReceiver(t *testing.T, answer func(d delivery, attempt int) int) *receiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &receiver{t: t, wh: wh, answer: answer, tries: map[string]int{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.serveWith(w, r, rc.answer) }

// serveWith serves one request, answering with answer (nil: 204).
func (rc *receiver) serveWith(w http.ResponseWriter, r *http.Request, answer func(d delivery, attempt int) int) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.t.Errorf("signature: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ev, err := cehttp.NewEventFromHTTPRequest(r)
	if err != nil {
		rc.t.Errorf("not a CloudEvent: %v", err)
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if err := ev.Validate(); err != nil {
		rc.t.Errorf("invalid CloudEvent: %v", err)
	}
	if got := r.Header.Get("webhook-id"); got != ev.ID() {
		rc.t.Errorf("webhook-id %q, ce-id %q", got, ev.ID())
	}
	if !bytes.Equal(ev.Data(), body) || ev.DataContentType() != "application/json" || ev.Source() != "maintsignals" {
		rc.t.Errorf("event %s: data or attributes changed", ev.ID())
	}
	ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	d := delivery{id: ev.ID(), ceType: ev.Type(), subject: ev.Subject(), ts: ts, body: body, at: time.Now()}
	rc.mu.Lock()
	rc.all = append(rc.all, d)
	i := len(rc.all) - 1
	rc.tries[d.id]++
	attempt := rc.tries[d.id]
	rc.mu.Unlock()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(d, attempt)
	}
	if status == 0 { // the answer handled the connection itself
		return
	}
	w.WriteHeader(status)
	rc.mu.Lock()
	rc.all[i].status = status
	rc.all[i].done = time.Now()
	rc.mu.Unlock()
}

// requests returns every request so far.
func (rc *receiver) requests() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.all...)
}

// succeeded returns the deliveries the receiver answered 2xx, de-duplicated by webhook-id as a
// receiver should, in the order they arrived.
func (rc *receiver) succeeded() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	var out []delivery
	for _, d := range rc.all {
		if d.status >= 200 && d.status < 300 && !seen[d.id] {
			seen[d.id] = true
			out = append(out, d)
		}
	}
	return out
}

// cluster is the resource ID of test cluster i.
func cluster(i int) string {
	return fmt.Sprintf("/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", i)
}

// publishEvent stores an outcome event as the command function does (body, Nats-Msg-Id and
// CloudEvents headers) and returns its id.
func publishEvent(t *testing.T, js jetstream.JetStream, res string, n int, to domain.State) string {
	t.Helper()
	m := eventMsg(res, n, to)
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m.Header.Get(domain.HeaderMsgID)
}

// eventMsg is outcome event n of res, to state to, as the command function stores it.
func eventMsg(res string, n int, to domain.State) *nats.Msg {
	id := fmt.Sprintf("cmd-%d:%d", n, n)
	ev := domain.Event{CommandID: fmt.Sprintf("cmd-%d", n), ResourceID: res, Task: domain.TaskPending, Outcome: domain.OutcomeApplied,
		From: domain.StateNone, To: to, At: time.Now().UTC(), CommandSeq: uint64(n)}
	b, _ := domain.EncodeEvent(ev)
	m := nats.NewMsg(domain.EventSubject(domain.MustKey(res)))
	m.Data = b
	m.Header.Set(domain.HeaderMsgID, id)
	domain.SetCloudEventHeaders(m.Header, domain.OutcomeCEType(ev.Outcome), id, res, ev.At)
	return m
}

// sub is a subscription to url with the test secret.
func sub(name, url string) webhook.Subscription {
	return webhook.Subscription{Name: name, URL: url, Secret: secret}
}

// logs collects what the function logs, to check that no secret is ever in it.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// checkNoSecret fails when the secret, or its decoded key in base64, shows in the logs.
func (l *logs) checkNoSecret(t *testing.T) {
	t.Helper()
	s := l.String()
	key, _ := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	// "s3cr3t" stands for a token in an endpoint's query.
	for _, bad := range []string{secret, secret[len("whsec_"):], base64.RawStdEncoding.EncodeToString(key), "s3cr3t"} {
		if bytes.Contains([]byte(s), []byte(bad)) {
			t.Fatalf("a secret is in the logs")
		}
	}
}

// start runs the webhook function until the returned stop is called (or the test ends), and
// returns once every subscription's consumers exist.
func start(t *testing.T, env *testenv.Env, cfg webhook.Config) (stop func()) {
	t.Helper()
	l := &logs{}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Backoff == nil {
		cfg.Backoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- webhook.Run(ctx, env.JS, cfg) }()
	for _, s := range cfg.Subscriptions {
		testenv.Eventually(t, 10*time.Second, "consumer of "+s.Name, func() bool {
			_, err := env.JS.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer(s.Name))
			return err == nil
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("webhook function: %v", err)
			}
			l.checkNoSecret(t)
			if t.Failed() {
				t.Logf("webhook function log:\n%s", l.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// inOrder fails unless the deliveries of each subject come in the order of want's ids.
func inOrder(t *testing.T, got []delivery, want map[string][]string) {
	t.Helper()
	per := map[string][]string{}
	for _, d := range got {
		per[d.subject] = append(per[d.subject], d.id)
	}
	for subj, ids := range want {
		if fmt.Sprint(per[subj]) != fmt.Sprint(ids) {
			t.Fatalf("%s: delivered %v, want %v", subj, per[subj], ids)
		}
	}
}
