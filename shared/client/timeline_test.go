package client_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"maintsignals/shared/client"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// A timeline replays events and notices merged in the order they were stored, then follows
// live: what is stored while it starts comes once, either in the replay or live, every replayed
// entry is older than every live one, and each stream keeps its order.
func TestTimeline_ReplaysInStoredOrderThenFollowsWithoutGapOrRepeat(t *testing.T) {
	c := setup(t, false)
	ctx := testenv.Context(t, time.Minute)
	ids := testenv.ResourceIDs("tl", 5)
	since := time.Now().Add(-time.Second)
	history := testenv.PublishTimeline(t, c.JS, rand.New(rand.NewPCG(1, 2)), "old", 300, ids)

	liveDone := make(chan []string, 1)
	go func() { liveDone <- testenv.PublishTimeline(t, c.JS, rand.New(rand.NewPCG(3, 4)), "new", 200, ids) }()
	tl, err := c.Timeline(ctx, client.TimelineOptions{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	live := <-liveDone
	want := append(slices.Clone(history), live...)
	var got []string
	var items []client.TimelineItem
	for len(got) < len(want) {
		it, err := tl.Next(ctx)
		if err != nil {
			t.Fatalf("after %d entries: %v", len(got), err)
		}
		items = append(items, it)
		got = append(got, itemID(it))
	}
	if !slices.Equal(got[:len(history)], history) {
		t.Fatalf("the replay is not in stored order:\n got %v\nwant %v", got[:len(history)], history)
	}
	for i := 1; i < len(history); i++ {
		if items[i].Stored.Before(items[i-1].Stored) {
			t.Fatalf("entry %d stored at %s, before entry %d (%s)", i, items[i].Stored, i-1, items[i-1].Stored)
		}
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	wantSorted := slices.Clone(want)
	slices.Sort(wantSorted)
	if !slices.Equal(sorted, wantSorted) {
		t.Fatalf("entries repeated or missing at the seam: got %d entries, want %d", len(got), len(want))
	}
	checkStreamOrder(t, items)
}

// checkStreamOrder fails unless each stream's entries (a cell's events, a cell's notices)
// come in their stream order.
func checkStreamOrder(t *testing.T, items []client.TimelineItem) {
	t.Helper()
	type stream struct {
		notice bool
		cell   domain.Cell
	}
	last := map[stream]uint64{}
	for i, it := range items {
		var s stream
		var seq uint64
		if it.Event != nil {
			seq, s.cell = it.Event.Seq, domain.CellOf(domain.MustKey(it.Event.ResourceID))
		} else {
			seq, s = it.Notice.Seq, stream{true, domain.CellOf(domain.MustKey(it.Notice.ResourceID))}
		}
		if seq <= last[s] {
			t.Fatalf("entry %d (%s): sequence %d after %d in its stream", i, itemID(it), seq, last[s])
		}
		last[s] = seq
	}
}

// With NoFollow the timeline is the replay, then io.EOF; of one entity, that entity's only
// (nothing, at once, for an entity without any).
func TestTimeline_NoFollowEndsAfterTheReplay(t *testing.T) {
	c := setup(t, false)
	ctx := testenv.Context(t, time.Minute)
	ids := testenv.ResourceIDs("nf", 3)
	since := time.Now().Add(-time.Second)
	others := testenv.PublishTimeline(t, c.JS, rand.New(rand.NewPCG(5, 6)), "nf", 120, ids[1:])
	one := testenv.PublishTimeline(t, c.JS, rand.New(rand.NewPCG(7, 8)), "one", 30, ids[:1])
	for _, tc := range []struct {
		resourceID string
		want       []string
	}{{"", append(slices.Clone(others), one...)}, {ids[0], one}, {testenv.ResourceIDs("none", 1)[0], nil}} {
		tl, err := c.Timeline(ctx, client.TimelineOptions{Since: since, NoFollow: true, ResourceID: tc.resourceID})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			it, err := tl.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, itemID(it))
		}
		tl.Stop()
		if !slices.Equal(got, tc.want) {
			t.Errorf("resource %q: replay %v, want %v", tc.resourceID, got, tc.want)
		}
	}
}

func itemID(it client.TimelineItem) string {
	if it.Event != nil {
		return it.Event.CommandID
	}
	return it.Notice.NoticeID
}

// The replay comes in the order of the entries' at, whichever order the two streams stored
// them in (a notice is dated by the record it judged, an event by the function that decided
// it); entries of equal at keep their stored order.
func TestTimeline_ReplaysInAtOrder(t *testing.T) {
	c := setup(t, false)
	ctx := testenv.Context(t, time.Minute)
	res := testenv.ResourceIDs("at", 2)
	since := time.Now().Add(-time.Second)
	base := since.Add(-time.Hour).UTC()
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	// In stored order: the defect's tick-dated reminder (.000) stored after the event of the
	// command it reports (.033), notices of one run dated by what each judged, a late event.
	stored := []struct {
		id     string
		notice bool
		at     time.Time
	}{
		{"e-pending", false, ms(33)},
		{"n-reminder-old", true, ms(0)},
		{"n-reminder-new", true, ms(35)},
		{"n-due", true, ms(0)},
		{"e-late", false, ms(20)},
		{"e-same-as-due", false, ms(0)},
		{"n-other", true, ms(40)},
	}
	for i, e := range stored {
		if err := testenv.PublishTimelineEntry(c.JS, res[i%2], e.id, e.notice, e.at); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"n-reminder-old", "n-due", "e-same-as-due", "e-late", "e-pending", "n-reminder-new", "n-other"}
	for _, follow := range []bool{false, true} {
		tl, err := c.Timeline(ctx, client.TimelineOptions{Since: since, NoFollow: !follow})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < len(want) {
			it, err := tl.Next(ctx)
			if err != nil {
				t.Fatalf("follow %v, after %v: %v", follow, got, err)
			}
			got = append(got, itemID(it))
		}
		tl.Stop()
		if !slices.Equal(got, want) {
			t.Errorf("follow %v: replay %v, want in at order %v", follow, got, want)
		}
	}
}
