package notices_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

const conflictScope = "/subscriptions/s1/resourceGroups/rg"

// setPolicy writes a revision of the resource group's policy; doc "" deletes it.
func setPolicy(t *testing.T, js jetstream.JetStream, doc string) uint64 {
	t.Helper()
	return testenv.PutPolicy(t, js, conflictScope, doc)
}

// freeze is a blackout over the day of the test windows (t0).
const freeze = `"blackouts": [{"start": "2037-12-01", "end": "2037-12-02", "reason": "freeze"}]`

// announcedRecord is a Pending window announced an hour ago (before any policy of the test).
func announcedRecord(id string) domain.Record {
	r := pendingRecord(id, sec(100), sec(160))
	r.LastCommandAt = time.Now().Add(-time.Hour)
	r.UpdatedAt = r.LastCommandAt // what the sweep's summary reads as the announcement
	return r
}

// TestNotices_ConflictOncePerWindowAndRevision: a policy set after the announcement that does not
// allow the window sends one conflict notice, not again on later runs or by a fresh replica; a
// newer revision that still does not allow it sends one more; one that allows it sends none; the
// lifecycle notices carry on, each once, around them.
func TestNotices_ConflictOncePerWindowAndRevision(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{}
	id := clusterID(1)
	put(t, env.JS, announcedRecord(id))
	// Another resource group's window: no policy covers it.
	other := "/subscriptions/s1/resourceGroups/rg-2/providers/Microsoft.RedHatOpenShift/openShiftClusters/c2"
	put(t, env.JS, announcedRecord(other))
	a := newNotifier(t, env.JS, clk)
	steps(t, a, clk, 0, 5)
	if got := stored(t, env.JS, ""); len(got) != 0 {
		t.Fatalf("notices %v before any policy", got)
	}
	r1 := setPolicy(t, env.JS, freeze)
	steps(t, a, clk, 10, 15)
	steps(t, newNotifier(t, env.JS, clk), clk, 20)
	if got := stored(t, env.JS, ""); !equal(got, "conflict/0") {
		t.Fatalf("notices %v, want one conflict", got)
	}
	c := storedNotices(t, env.JS)[0]
	if c.ResourceID != id || c.Policy == nil || c.Policy.Scope != conflictScope || c.Policy.Revision != r1 || !strings.Contains(c.Message, "overlaps the blackout") ||
		!strings.HasSuffix(c.NoticeID, fmt.Sprintf("r%d:0", r1)) || c.Window == nil || !c.Window.Start.Equal(sec(100)) {
		t.Errorf("conflict notice %+v", c)
	}
	r2 := setPolicy(t, env.JS, freeze+`, "minNotice": "1h"`)
	steps(t, a, clk, 25, 30, 40)
	// A fresh replica after the reminder that followed the conflict: the reminder says the
	// conflict is sent, nothing goes out again.
	if res := run(t, newNotifier(t, env.JS, clk)); res.Published != 0 {
		t.Errorf("a fresh replica published %d notices again", res.Published)
	}
	setPolicy(t, env.JS, `"minNotice": "1h"`) // allows the window: no conflict
	steps(t, a, clk, every(45, 200, 5)...)
	if got := stored(t, env.JS, id); !equal(got, "conflict/0", "conflict/0", "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Fatalf("notices %v, want one conflict per revision, then the lifecycle ones", got)
	}
	if got := stored(t, env.JS, other); !equal(got, "reminder/60", "reminder/30", "due/0", "overdue/0") {
		t.Errorf("the uncovered entity's notices %v, want its lifecycle alone", got)
	}
	var second string
	testenv.ReadNotices(t, env.JS, func(m jetstream.Msg) {
		nt, _ := domain.DecodeNotice(m.Data())
		switch {
		case nt.ResourceID != id:
		case nt.Kind == domain.NoticeConflict && second == "":
			second = "-"
		case nt.Kind == domain.NoticeConflict:
			second = nt.NoticeID
			if nt.Policy.Revision != r2 {
				t.Errorf("the second conflict %+v, want revision %d", nt, r2)
			}
		case m.Headers().Get(domain.HeaderNoticeConflict) != second:
			t.Errorf("%s carries conflict %q, want %q: the last notice must say how far both kinds got", nt.NoticeID, m.Headers().Get(domain.HeaderNoticeConflict), second)
		}
	})
	checkOnce(t, env.JS)
}

// TestNotices_ConflictExactlyOnceAcrossCrashesAndReplicas: a replica killed before publishing
// the conflict leaves it to the next run; one killed right after publishing does not make the
// next send it again; replicas racing on one tick store it once.
func TestNotices_ConflictExactlyOnceAcrossCrashesAndReplicas(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.WithTick(time.Second))
	clk := &clock{now: sec(5)}
	for i := 1; i <= 3; i++ {
		put(t, env.JS, announcedRecord(clusterID(i)))
	}
	setPolicy(t, env.JS, freeze)
	before := newNotifier(t, env.JS, clk)
	before.SetHooks(func(domain.Notice) error { return errCrash }, nil)
	if _, err := before.RunOnce(testenv.Context(t, 5*time.Second)); err == nil {
		t.Fatal("the killed run reported success")
	}
	if got := stored(t, env.JS, ""); len(got) != 0 {
		t.Fatalf("notices %v stored by a replica killed before publishing", got)
	}
	after := newNotifier(t, env.JS, clk)
	after.SetHooks(nil, func(domain.Notice) error { return errCrash })
	if _, err := after.RunOnce(testenv.Context(t, 5*time.Second)); err == nil {
		t.Fatal("the killed run reported success")
	}
	var wg sync.WaitGroup
	for range 3 {
		n := newNotifier(t, env.JS, clk)
		wg.Add(1)
		go func() { defer wg.Done(); run(t, n) }()
	}
	wg.Wait()
	if got := stored(t, env.JS, ""); !equal(got, "conflict/0", "conflict/0", "conflict/0") {
		t.Fatalf("notices %v, want one conflict per entity", got)
	}
	checkOnce(t, env.JS)
}
