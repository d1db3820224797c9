package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// Turning webhooks on for a deployment that has a history delivers none of it: a new
// subscription starts at the events stored after it was created, with the feed created at that
// moment by `up --subscriptions`, and again with the feed re-created after it was removed.
func TestWebhooks_EnabledOnHistoryDeliverOnlyNewEvents(t *testing.T) {
	data := copyHistory(t)
	hooks := newHooks(t)
	subs := writeSubs(t, map[string]*hookServer{"crm": hooks})
	port := testenv.FreePort(t)

	up := startUp(t, port, data, "--sync-always=false", "--subscriptions", subs)
	mustContain(t, "up output", up.out.String(), domain.WebhookStream)
	onlyNew(t, up.URL, hooks, "crm", "/webhooks/e2e/new-1")
	up.stop()

	// Webhooks off (no webhook function, and the feed removed, to stop paying its writes),
	// then on again.
	up = startUp(t, port, data, "--sync-always=false", "--self-service=false")
	if err := connectJS(t, up.URL).DeleteStream(context.Background(), domain.WebhookStream); err != nil {
		t.Fatal(err)
	}
	up.stop()
	hooks.reset()
	up = startUp(t, port, data, "--sync-always=false", "--subscriptions", subs)
	onlyNew(t, up.URL, hooks, "crm", "/webhooks/e2e/new-2")
	up.stop()
}

// A subscription created while the feed is still copying a history (a feed provisioned by
// earlier releases, which copied everything) delivers none of it either.
func TestWebhooks_FeedStillCopyingDeliversOnlyNewEvents(t *testing.T) {
	data := copyHistory(t)
	hooks := newHooks(t)
	subs := writeSubs(t, map[string]*hookServer{"crm": hooks})
	up := startUp(t, testenv.FreePort(t), data, "--sync-always=false", "--self-service=false")
	js := connectJS(t, up.URL)
	cfg, err := provision.Config{Webhooks: true}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	streams := provision.Streams(cfg)
	feed := streams[len(streams)-1] // its sources without a start: it copies the whole history
	// The feed copies while the function process starts: on a busy machine the copy may win
	// the race, and then the case is tried again on a new feed.
	var proc *testenv.Proc
	for attempt := 1; ; attempt++ {
		if _, err := js.CreateStream(context.Background(), feed); err != nil {
			t.Fatal(err)
		}
		fn := exec.Command(bin, "function", "webhook", "--subscriptions", subs)
		fn.Env = append(baseEnv(), "NATS_URL="+up.URL)
		proc = testenv.StartProc(t, fmt.Sprintf("webhook-%d", attempt), fn)
		info := waitConsumer(t, js, "crm")
		copied := info.Config.OptStartSeq - 1
		if copied < uint64(historySize) {
			t.Logf("the feed had copied %d of the %d messages of the history when the subscription was created", copied, historySize)
			break
		}
		if attempt == 3 {
			t.Fatalf("the feed had copied all %d messages of the history when the subscription was created, %d times: the case is not exercised", copied, attempt)
		}
		t.Logf("the feed had copied the whole history before the subscription was created; again on a new feed")
		proc.Kill()
		if err := js.DeleteStream(context.Background(), domain.WebhookStream); err != nil {
			t.Fatal(err)
		}
	}
	onlyNew(t, up.URL, hooks, "crm", "/webhooks/e2e/new-1")
	if err := proc.Term(30 * time.Second); err != nil {
		t.Errorf("function webhook: %v", err)
	}
	up.stop()
}

// With --from-start a new subscription starts at the oldest event the feed keeps: what was
// stored since webhooks were turned on, none of the history before; a subscription with
// progress keeps it.
func TestWebhooks_FromStartDeliversWhatTheFeedKeeps(t *testing.T) {
	data := copyHistory(t)
	crm, backfill := newHooks(t), newHooks(t)
	port := testenv.FreePort(t)
	up := startUp(t, port, data, "--sync-always=false", "--subscriptions", writeSubs(t, map[string]*hookServer{"crm": crm}))
	js := connectJS(t, up.URL)
	waitConsumer(t, js, "crm")
	ids := testenv.ResourceIDs("since", 20)
	var cmds []domain.Command
	for i, id := range ids {
		cmds = append(cmds, domain.Command{ID: fmt.Sprintf("since-%d", i), ResourceID: id, Task: domain.TaskPending, Actor: "e2e"})
	}
	testenv.PublishAll(t, js, cmds, nil)
	testenv.Eventually(t, time.Minute, "the events since the feed began delivered", func() bool { return len(crm.got()) >= len(cmds) })
	testenv.WebhookSettled(t, js, "crm", time.Minute)
	if n := len(crm.got()); n != len(cmds) {
		t.Fatalf("crm got %d deliveries of the %d events since it began", n, len(cmds))
	}
	up.stop()

	up = startUp(t, port, data, "--sync-always=false", "--from-start",
		"--subscriptions", writeSubs(t, map[string]*hookServer{"crm": crm, "backfill": backfill}))
	js = connectJS(t, up.URL)
	waitConsumer(t, js, "backfill")
	testenv.WebhookSettled(t, js, "backfill", time.Minute)
	testenv.WebhookSettled(t, js, "crm", time.Minute)
	got := backfill.got()
	if len(got) != len(cmds) || len(crm.got()) != len(cmds) {
		t.Fatalf("from the start: backfill got %d, crm %d deliveries; want each of the %d events since the feed began, once", len(got), len(crm.got()), len(cmds))
	}
	for i, h := range got {
		if !slices.Contains(ids, h.subject) {
			t.Errorf("backfill delivery %d is of %s, not an event since the feed began", i, h.subject)
		}
	}
	ok(t, up.URL, "pending", "/webhooks/e2e/new-1")
	testenv.WebhookSettled(t, js, "backfill", time.Minute)
	testenv.WebhookSettled(t, js, "crm", time.Minute)
	if b, c := len(backfill.got()), len(crm.got()); b != len(cmds)+1 || c != len(cmds)+1 {
		t.Fatalf("after one new command: backfill %d, crm %d deliveries, want %d each", b, c, len(cmds)+1)
	}
	up.stop()
}

// onlyNew checks that subscription sub, once its consumer exists and the feed is copied and
// settled, has delivered nothing, then that one new command sent with maintctl is delivered
// exactly once.
func onlyNew(t *testing.T, url string, hooks *hookServer, sub, resourceID string) {
	t.Helper()
	js := connectJS(t, url)
	waitConsumer(t, js, sub)
	testenv.WebhookSettled(t, js, sub, 2*time.Minute)
	if got := hooks.got(); len(got) != 0 {
		t.Fatalf("%d deliveries of events stored before the subscription, e.g. %+v", len(got), got[0])
	}
	ok(t, url, "pending", resourceID)
	testenv.Eventually(t, 30*time.Second, "the new event delivered", func() bool { return len(hooks.got()) > 0 })
	testenv.WebhookSettled(t, js, sub, time.Minute)
	got := hooks.got()
	if len(got) != 1 || got[0].subject != resourceID || got[0].ceType != domain.CETypeApplied {
		t.Fatalf("after one new command: %+v, want one applied event of %s", got, resourceID)
	}
}

func waitConsumer(t *testing.T, js jetstream.JetStream, sub string) *jetstream.ConsumerInfo {
	t.Helper()
	var info *jetstream.ConsumerInfo
	testenv.Eventually(t, 30*time.Second, "the consumer of subscription "+sub, func() bool {
		c, err := js.Consumer(context.Background(), domain.WebhookStream, domain.WebhookConsumer(sub))
		if err == nil {
			info = c.CachedInfo()
		}
		return err == nil
	})
	return info
}

func connectJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return testenv.JetStream(t, nc)
}

// hook is one delivery an endpoint received.
type hook struct{ id, ceType, subject string }

// hookServer is an integrator's endpoint: it records every POST and answers 204.
type hookServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hook []hook
}

func newHooks(t *testing.T) *hookServer {
	h := &hookServer{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.hook = append(h.hook, hook{r.Header.Get("webhook-id"), r.Header.Get("ce-type"), r.Header.Get("ce-subject")})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) got() []hook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hook(nil), h.hook...)
}

func (h *hookServer) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hook = nil
}

// writeSubs writes a subscriptions file: one subscription per name, to that endpoint.
func writeSubs(t *testing.T, subs map[string]*hookServer) string {
	t.Helper()
	type sub struct{ Name, URL, Secret string }
	var list []sub
	for name, h := range subs {
		list = append(list, sub{name, h.srv.URL + "/hook", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	}
	b, _ := json.Marshal(list)
	path := filepath.Join(t.TempDir(), "subscriptions.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The history every webhook test starts from: historyClusters clusters announced Pending with a
// window two hours away, each with its outcome event and its 24 h reminder, made once by a
// `maintctl up` with no webhooks and copied for each test.
const historyClusters = 2000

// historySize is how many events and notices the history holds.
const historySize = 2 * historyClusters

var hist struct {
	once sync.Once
	dir  string
	err  string
}

// copyHistory returns a data directory holding a copy of the history.
func copyHistory(t *testing.T) string {
	t.Helper()
	hist.once.Do(func() { hist.dir, hist.err = makeHistory(t) })
	if hist.err != "" {
		t.Fatalf("history: %s", hist.err)
	}
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(hist.dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func makeHistory(t *testing.T) (string, string) {
	root, err := os.MkdirTemp("", "e2e-history-")
	if err != nil {
		return "", err.Error()
	}
	historyRoot = root
	data := filepath.Join(root, "data")
	// Without webhooks: no feed copies the history as it is made.
	up := startUp(t, testenv.FreePort(t), data, "--sync-always=false", "--self-service=false")
	js := connectJS(t, up.URL)
	start := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	var cmds []domain.Command
	for i, id := range testenv.ResourceIDs("hist", historyClusters) {
		cmds = append(cmds, domain.Command{ID: fmt.Sprintf("hist-%d", i), ResourceID: id, Task: domain.TaskPending, Actor: "e2e",
			Reason: "announced", Window: &domain.Window{Start: start, End: start.Add(2 * time.Hour)}})
	}
	testenv.PublishAll(t, js, cmds, nil)
	counts := func() (uint64, uint64) {
		return testenv.StoredMsgs(js, domain.EventsStreams()...), testenv.StoredMsgs(js, domain.NoticesStreams()...)
	}
	testenv.Eventually(t, 2*time.Minute, "the history's events and reminders", func() bool {
		ev, nt := counts()
		return ev >= historyClusters && nt >= historyClusters
	})
	time.Sleep(1500 * time.Millisecond) // another tick: no second reminder
	ev, nt := counts()
	up.stop()
	if ev != historyClusters || nt != historyClusters {
		return "", fmt.Sprintf("%d events and %d notices, want %d each", ev, nt, historyClusters)
	}
	return data, ""
}

// historyRoot is removed when the tests end.
var historyRoot string

func removeHistory() {
	if historyRoot != "" {
		_ = os.RemoveAll(historyRoot)
	}
}
