package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// `maintctl function webhook --subscriptions FILE` delivers; a refused delivery is listed by
// `dlq list` under its subscription and `dlq replay` sends it to that endpoint again, with the
// same webhook-id.
func TestFunctionWebhook_DeadLetterListedAndReplayed(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	var (
		mu     sync.Mutex
		ids    []string
		refuse = true
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get("webhook-id")+" "+r.Header.Get("ce-type"))
		if refuse {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "subscriptions.json")
	subs := fmt.Sprintf(`[{"name":"crm","url":%q,"secret":%q,"types":["io.maintsignals.command.applied"]}]`, srv.URL+"/hook", webhookSecret)
	if err := os.WriteFile(file, []byte(subs), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- c.runCtx(ctx, "function", "webhook", "--subscriptions", file) }()
	testenv.Eventually(t, 20*time.Second, "the subscription's consumer", func() bool {
		_, err := s.JS.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer("crm"))
		return err == nil
	})

	m := nats.NewMsg(domain.EventSubject(domain.MustKey(testID)))
	m.Data, _ = domain.EncodeEvent(domain.Event{CommandID: "w-1", ResourceID: testID, Task: domain.TaskPending, Outcome: domain.OutcomeApplied, To: domain.StatePending, At: time.Now()})
	m.Header.Set(domain.HeaderMsgID, "w-1:1")
	domain.SetCloudEventHeaders(m.Header, domain.CETypeApplied, "w-1:1", testID, time.Now())
	if _, err := s.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var out string
	testenv.Eventually(t, 10*time.Second, "the refused delivery in the dead letters", func() bool {
		out = c.ok("dlq", "list")
		return strings.Contains(out, "crm")
	})
	mustContain(t, "dlq list", out, "WEBHOOK", "rg-1/c1", "Pending", "crm", "HTTP 404")
	mustContain(t, "dlq list -o wide", c.ok("dlq", "list", "-o", "wide"), testID, "w-1:1")
	docs := decodeJSON[[]letterJSON](t, c.ok("dlq", "list", "-o", "json"))
	if len(docs) != 1 || docs[0].Subscription != "crm" || docs[0].CommandID != "w-1:1" || docs[0].ResourceID != testID {
		t.Fatalf("dlq list -o json = %+v", docs)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	seq := strconv.FormatUint(docs[0].Seq, 10)
	if out := c.ok("dlq", "list", "-o", "name"); out != seq+"\n" {
		t.Errorf("dlq list -o name = %q, want the sequence", out)
	}
	mustContain(t, "dlq list of another subscription", c.ok("dlq", "list", "--subscription", "pager"), "no dead letter")
	mustContain(t, "dlq list since an hour ago", c.ok("dlq", "list", "--since", "1h", "--subscription", "crm"), "crm", "HTTP 404")
	mustContain(t, "dlq replay of another subscription", c.ok("dlq", "replay", "--subscription", "pager"), "no dead letter to replay")
	if r := c.run("dlq", "replay", "--subscription", "crm", seq); r.err == nil || !strings.Contains(r.err.Error(), "not both") {
		t.Errorf("dlq replay SEQ with --subscription: %v", r.err)
	}
	mustContain(t, "replay", c.ok("dlq", "replay", "--subscription", "crm"), "replayed dead letter "+seq+": event w-1:1", "to webhook crm", "now MAINT_WEBHOOK sequence ")
	testenv.Eventually(t, 10*time.Second, "the replayed delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) == 2
	})
	mu.Lock()
	if ids[0] != "w-1:1 io.maintsignals.command.applied" || ids[1] != ids[0] {
		t.Errorf("deliveries %q: want the same webhook-id and type twice", ids)
	}
	mu.Unlock()
	mustContain(t, "dlq list after replay", c.ok("dlq", "list"), "no dead letter")
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("function webhook: %v\n%s", r.err, r.stderr)
	}
	if strings.Contains(r.stderr, webhookSecret) || strings.Contains(r.stderr, "/hook") {
		t.Fatalf("the logs show the secret or the endpoint's path:\n%s", r.stderr)
	}
}

func TestFunctionWebhook_NeedsValidSubscriptions(t *testing.T) {
	s := startStack(t, stackOpts{noFunction: true})
	c := newCLI(t, s)
	if r := c.run("function", "webhook", "--self-service=false"); r.err == nil || !strings.Contains(r.err.Error(), "--subscriptions") {
		t.Fatalf("without --subscriptions nor self-service: %v", r.err)
	}
	file := filepath.Join(t.TempDir(), "subscriptions.json")
	_ = os.WriteFile(file, []byte(`[{"name":"x","url":"https://example.com","secret":"whsec_c2hvcnQ="}]`), 0o600)
	if r := c.run("function", "webhook", "--subscriptions", file); r.err == nil || !strings.Contains(r.err.Error(), "at least 16 bytes") || strings.Contains(r.err.Error(), "c2hvcnQ") {
		t.Fatalf("bad secret: %v", r.err)
	}
}

// `up --subscriptions FILE` provisions the webhook feed and delivers a command's outcome; `up`
// without subscriptions and without self-service ones provisions no feed (it would cost a
// write per outcome for nothing).
func TestUp_SubscriptionsBringTheWebhookFeed(t *testing.T) {
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get("ce-type")
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "subscriptions.json")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`[{"name":"crm","url":%q,"secret":%q}]`, srv.URL, webhookSecret)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 30*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--subscriptions", file)
	if !feedCreated.MatchString(u.out.String()) {
		t.Errorf("up with subscriptions did not provision the webhook feed:\n%s", u.out)
	}
	m := listenRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("up did not print where it listens:\n%s", u.out)
	}
	c.env["NATS_URL"] = m[1]
	// A new subscription starts at new events: send once its consumer is there.
	nc, err := nats.Connect(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	testenv.Eventually(t, 20*time.Second, "the subscription's consumer", func() bool {
		_, err := js.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer("crm"))
		return err == nil
	})
	c.ok("pending", testID)
	select {
	case typ := <-got:
		if typ != domain.OutcomeCEType(domain.OutcomeApplied) {
			t.Errorf("delivered %q, want the applied outcome", typ)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20 s")
	}
	if r := u.stop(); r.err != nil {
		t.Fatal(r.err)
	}

	u = startUpInProcess(t, c, 30*time.Second, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--self-service=false")
	if feedCreated.MatchString(u.out.String()) {
		t.Errorf("up without subscriptions provisioned the webhook feed:\n%s", u.out)
	}
	// Stopped once its functions run (a stop while they start reports their cancelled start).
	if m = listenRE.FindStringSubmatch(u.out.String()); m == nil {
		t.Fatalf("up did not print where it listens:\n%s", u.out)
	}
	c.env["NATS_URL"] = m[1]
	c.ok("pending", testID)
	if r := u.stop(); r.err != nil {
		t.Fatal(r.err)
	}
}

var feedCreated = regexp.MustCompile(`stream\s+` + domain.WebhookStream + `\s+created`)
