package notices_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/notices"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// clock is a settable clock shared by replicas.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// ladder is the short ladder of the tests: 60 s and 30 s ahead.
var ladder = []time.Duration{60 * time.Second, 30 * time.Second}

func newNotifier(t testing.TB, js jetstream.JetStream, clk *clock) *notices.Notifier {
	t.Helper()
	n, err := notices.New(testenv.Context(t, 5*time.Second), js, notices.Config{
		Remind: ladder, StuckAfter: time.Minute, Now: clk.Now, Logger: testenv.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// run is one tick's run of replica n, which must succeed.
func run(t testing.TB, n *notices.Notifier) notices.Result {
	t.Helper()
	res, err := n.RunOnce(testenv.Context(t, 10*time.Second))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// put writes rec as the entity's record, whatever its revision.
func put(t testing.TB, js jetstream.JetStream, rec domain.Record) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	st, err := store.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	key := domain.MustKey(rec.ResourceID)
	prev, rev, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rec.Version = domain.RecordVersion
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.StateSince
	}
	// As if a later command wrote it: the store refuses a record that moves backwards.
	if rec.LastCommandSeq <= prev.LastCommandSeq {
		rec.LastCommandSeq = prev.LastCommandSeq + 1
	}
	if _, err := st.Put(ctx, key, store.Versioned{Record: prev, Rev: rev}, rec); err != nil {
		t.Fatal(err)
	}
}

// stored lists every notice in MAINT_NOTICES, oldest first, as "kind/lead" for the entity id
// (all entities when id is "").
func stored(t testing.TB, js jetstream.JetStream, id string) []string {
	t.Helper()
	var out []string
	for _, n := range storedNotices(t, js) {
		if id == "" || n.ResourceID == id {
			out = append(out, fmt.Sprintf("%s/%d", n.Kind, n.Lead))
		}
	}
	return out
}

func storedNotices(t testing.TB, js jetstream.JetStream) []domain.Notice {
	t.Helper()
	var out []domain.Notice
	var at []time.Time
	testenv.ReadNotices(t, js, func(m jetstream.Msg) {
		n, err := domain.DecodeNotice(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Headers().Get(domain.HeaderMsgID); got != n.NoticeID {
			t.Errorf("notice %s stored with Nats-Msg-Id %q", n.NoticeID, got)
		}
		if want := domain.NoticeSubject(domain.MustKey(n.ResourceID)); m.Subject() != want {
			t.Errorf("notice %s on %s, want %s", n.NoticeID, m.Subject(), want)
		}
		checkCloudEvent(t, m, n)
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
		at = append(at, md.Timestamp)
	})
	// In the order the server stored them, across the cells.
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return at[idx[a]].Before(at[idx[b]]) })
	sorted := make([]domain.Notice, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

// checkOnce fails when a notice id is stored twice.
func checkOnce(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range storedNotices(t, js) {
		if seen[n.NoticeID] {
			t.Errorf("notice %s stored twice", n.NoticeID)
		}
		seen[n.NoticeID] = true
	}
}

func equal(got []string, want ...string) bool {
	return strings.Join(got, " ") == strings.Join(want, " ")
}

var errCrash = errors.New("replica killed")

func clusterID(i int) string {
	return fmt.Sprintf("/subscriptions/s1/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/c%d", i)
}

// checkCloudEvent rebuilds a stored notice as a CloudEvent (binary mode: the ce-* headers and
// the body) with the CloudEvents SDK and checks it is valid and says what the notice says.
func checkCloudEvent(t testing.TB, m jetstream.Msg, n domain.Notice) {
	t.Helper()
	h := http.Header{}
	for k, vs := range m.Headers() {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	ev, err := binding.ToEvent(context.Background(), cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(m.Data()))))
	if err != nil {
		t.Fatalf("notice %s: not a CloudEvent: %v", n.NoticeID, err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("notice %s: invalid CloudEvent: %v", n.NoticeID, err)
	}
	if ev.ID() != n.NoticeID || ev.Type() != domain.NoticeCEType(string(n.Kind)) || ev.Subject() != n.ResourceID ||
		ev.Source() != domain.CESource || !ev.Time().Equal(n.At) || !bytes.Equal(ev.Data(), m.Data()) {
		t.Errorf("notice %s: CloudEvent %s", n.NoticeID, ev.Context)
	}
}
