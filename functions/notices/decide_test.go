package notices_test

import (
	"testing"
	"time"

	"maintsignals/functions/notices"
	"maintsignals/shared/domain"
)

func TestDecide_LadderDueOverdueStuck(t *testing.T) {
	start := time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)
	w := &domain.Window{Start: start, End: start.Add(4 * time.Hour)}
	since := start.Add(-20 * 24 * time.Hour)
	pending := domain.Record{ResourceID: "/c1", State: domain.StatePending, Window: w, StateSince: since}
	ladder := []time.Duration{336 * time.Hour, 168 * time.Hour, 24 * time.Hour}
	const stuck = 6 * time.Hour
	series := notices.WindowSeries(pending)
	sent := func(kind domain.NoticeKind, lead time.Duration) *notices.Sent {
		return &notices.Sent{Series: series, Kind: kind, Lead: int64(lead / time.Second)}
	}
	updStart := start.Add(time.Hour)
	updating := domain.Record{ResourceID: "/c1", State: domain.StatePlanned, Updating: true, Task: domain.TaskEverything,
		Window: w, StateSince: updStart, UpdatedAt: updStart, LastCommandSeq: 42}
	useries := notices.UpdateSeries(updating)

	tests := []struct {
		name     string
		rec      domain.Record
		now      time.Time
		last     *notices.Sent
		wantKind domain.NoticeKind // "" = nothing to publish
		wantLead int64
	}{
		{"three weeks ahead: nothing yet", pending, start.Add(-21 * 24 * time.Hour), nil, "", 0},
		{"exactly two weeks ahead: first rung", pending, start.Add(-336 * time.Hour), nil, domain.NoticeReminder, 336 * 3600},
		{"first rung already sent", pending, start.Add(-300 * time.Hour), sent(domain.NoticeReminder, 336*time.Hour), "", 0},
		{"one week ahead after the first rung", pending, start.Add(-168 * time.Hour), sent(domain.NoticeReminder, 336*time.Hour), domain.NoticeReminder, 168 * 3600},
		{"announced late, three days ahead: only the nearest rung due", pending, start.Add(-72 * time.Hour), nil, domain.NoticeReminder, 168 * 3600},
		{"announced 2h ahead: the last rung only", pending, start.Add(-2 * time.Hour), nil, domain.NoticeReminder, 24 * 3600},
		{"a later rung is never sent again after an earlier one", pending, start.Add(-2 * time.Hour), sent(domain.NoticeReminder, 24*time.Hour), "", 0},
		{"start has come: due", pending, start, sent(domain.NoticeReminder, 24*time.Hour), domain.NoticeDue, 0},
		{"due sent", pending, start.Add(time.Hour), sent(domain.NoticeDue, 0), "", 0},
		{"window ended while Pending: overdue", pending, w.End, sent(domain.NoticeDue, 0), domain.NoticeOverdue, 0},
		{"window passed unseen: overdue only", pending, w.End.Add(time.Hour), nil, domain.NoticeOverdue, 0},
		{"overdue sent: nothing more", pending, w.End.Add(48 * time.Hour), sent(domain.NoticeOverdue, 0), "", 0},
		{"last notice of another window: this window's stage", pending, start.Add(-100 * time.Hour),
			&notices.Sent{Series: "wother", Kind: domain.NoticeOverdue}, domain.NoticeReminder, 168 * 3600},
		{"Pending without a window: nothing", domain.Record{State: domain.StatePending, StateSince: since}, start, nil, "", 0},
		{"Planned with the window (started): nothing", domain.Record{State: domain.StatePlanned, Window: w, StateSince: start}, start.Add(time.Hour), nil, "", 0},
		{"None: nothing", domain.Record{State: domain.StateNone, StateSince: since}, start, nil, "", 0},
		{"update within the limit: nothing", updating, updStart.Add(stuck), nil, "", 0},
		{"update past the limit: stuck", updating, updStart.Add(stuck + time.Second), sent(domain.NoticeDue, 0), domain.NoticeStuck, 0},
		{"stuck sent for this update", updating, updStart.Add(10 * stuck), &notices.Sent{Series: useries, Kind: domain.NoticeStuck}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := notices.Decide("c1", tt.rec, tt.now, ladder, stuck, tt.last)
			if tt.wantKind == "" {
				if ok {
					t.Fatalf("decided %+v, want nothing", n)
				}
				return
			}
			if !ok {
				t.Fatalf("decided nothing, want %s", tt.wantKind)
			}
			if n.Kind != tt.wantKind || n.Lead != tt.wantLead {
				t.Errorf("decided %s lead %d, want %s lead %d", n.Kind, n.Lead, tt.wantKind, tt.wantLead)
			}
			if !n.At.Equal(tt.now) || n.ResourceID != tt.rec.ResourceID || n.State != tt.rec.State || !n.StateSince.Equal(tt.rec.StateSince) {
				t.Errorf("notice body %+v does not describe the record at now", n)
			}
			key, kind, _, lead, err := domain.ParseNoticeID(n.NoticeID)
			if err != nil || key != "c1" || kind != n.Kind || lead != n.Lead {
				t.Errorf("notice id %q: key %q kind %q lead %d err %v", n.NoticeID, key, kind, lead, err)
			}
		})
	}
}

func TestSeries_NewWindowNewSeriesSameWindowSameSeries(t *testing.T) {
	start := time.Date(2026, 12, 14, 2, 0, 0, 0, time.UTC)
	since := start.Add(-24 * time.Hour)
	rec := func(s, e time.Time, since time.Time) domain.Record {
		return domain.Record{State: domain.StatePending, Window: &domain.Window{Start: s, End: e}, StateSince: since}
	}
	a := notices.WindowSeries(rec(start, start.Add(time.Hour), since))
	if b := notices.WindowSeries(rec(start.In(time.FixedZone("x", 3600)), start.Add(time.Hour), since)); a != b {
		t.Errorf("the same window in another zone is another series: %s %s", a, b)
	}
	if b := notices.WindowSeries(rec(start, start.Add(2*time.Hour), since)); a == b {
		t.Error("another end, same series")
	}
	if b := notices.WindowSeries(rec(start, start.Add(time.Hour), since.Add(time.Minute))); a == b {
		t.Error("announced again after leaving Pending, same series")
	}
}

func TestConfig_Ladder(t *testing.T) {
	c, err := notices.Config{}.WithDefaults()
	if err != nil || notices.FormatLadder(c.Remind) != "14d,7d,1d" {
		t.Fatalf("default ladder %v (%v)", c.Remind, err)
	}
	if l, err := notices.ParseLadder("2w,7d,24h"); err != nil || notices.FormatLadder(l) != "14d,7d,1d" {
		t.Fatalf("ladder in weeks, days and hours: %v (%v)", l, err)
	}
	l, err := notices.ParseLadder("2s, 10s,2s")
	if err != nil {
		t.Fatal(err)
	}
	c, err = notices.Config{Remind: l}.WithDefaults()
	if err != nil || notices.FormatLadder(c.Remind) != "10s,2s" {
		t.Fatalf("ladder %v (%v), want sorted longest first, without repeats", c.Remind, err)
	}
	if l, _ := notices.ParseLadder(""); l == nil || len(l) != 0 {
		t.Fatalf("empty ladder %v, want empty and not nil (no reminders)", l)
	}
	for _, bad := range []string{"1500ms", "0s", "-1h"} {
		l, err := notices.ParseLadder(bad)
		if err == nil {
			_, err = notices.Config{Remind: l}.WithDefaults()
		}
		if err == nil {
			t.Errorf("ladder %q accepted", bad)
		}
	}
}

// A record stored after the tick's time is judged, and its notice dated, as of when it was
// stored; the notice's id stays the one a run at the tick would give it, so that a replica or
// a redelivery judging at either time stores it once.
func TestDecide_NoticeNeverPredatesTheRevisionItJudged(t *testing.T) {
	tick := time.Date(2026, 12, 2, 2, 21, 22, 0, time.UTC)
	since := tick.Add(33 * time.Millisecond) // stateSince .033 of the defect
	ladder := []time.Duration{60 * time.Second, 30 * time.Second}
	pending := func(since time.Time, start time.Time) domain.Record {
		return domain.Record{ResourceID: "/c1", State: domain.StatePending, StateSince: since, UpdatedAt: since,
			Window: &domain.Window{Start: start, End: start.Add(30 * time.Second)}}
	}
	tests := []struct {
		name     string
		rec      domain.Record
		stored   time.Time
		wantAt   time.Time
		wantKind domain.NoticeKind
	}{
		{"stored long before the tick: at the tick", pending(tick.Add(-time.Hour), tick.Add(20*time.Second)), tick.Add(-time.Hour), tick, domain.NoticeReminder},
		{"stored after the tick: at its stored time", pending(since, tick.Add(20*time.Second)), since.Add(2 * time.Millisecond), since.Add(2 * time.Millisecond), domain.NoticeReminder},
		{"stored at the tick's time: at the tick", pending(tick.Add(-time.Second), tick.Add(20*time.Second)), tick, tick, domain.NoticeReminder},
		// A writer whose clock runs ahead (stateSince after the stored time) does not move the
		// judgement into the future: the server's times alone count.
		{"writer's clock ahead of the server's: at the tick, not its stateSince", pending(tick.Add(time.Hour), tick.Add(20*time.Second)), tick.Add(-time.Millisecond), tick, domain.NoticeReminder},
		{"no stored time (a record from elsewhere): at the tick", pending(tick.Add(-time.Hour), tick.Add(20*time.Second)), time.Time{}, tick, domain.NoticeReminder},
		{"window starts between the tick and the stored time: due as of the stored time", pending(since, tick.Add(10*time.Millisecond)), since, since, domain.NoticeDue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := notices.JudgedAt(tick, tt.stored)
			if !at.Equal(tt.wantAt) {
				t.Fatalf("judged at %s, want %s", at.Format(time.RFC3339Nano), tt.wantAt.Format(time.RFC3339Nano))
			}
			n, ok := notices.Decide("c1", tt.rec, at, ladder, time.Hour, nil)
			if !ok || n.Kind != tt.wantKind {
				t.Fatalf("decided %+v (%v), want %s", n, ok, tt.wantKind)
			}
			if n.At.Before(tt.stored) || n.At.Before(tick) {
				t.Errorf("notice at %s, before the tick %s or the revision's stored time %s",
					n.At.Format(time.RFC3339Nano), tick.Format(time.RFC3339Nano), tt.stored.Format(time.RFC3339Nano))
			}
			if atTick, ok := notices.Decide("c1", tt.rec, tick, ladder, time.Hour, nil); ok && atTick.Kind == n.Kind && atTick.NoticeID != n.NoticeID {
				t.Errorf("notice id %s judged at the stored time, %s at the tick: not one notice", n.NoticeID, atTick.NoticeID)
			}
		})
	}
}
