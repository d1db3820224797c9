package notices

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"maintsignals/shared/domain"
)

// Each entity has at most one notice series going at a time: the announced window while it is
// Pending with one, or the update while one is in progress (an update moves Pending to
// Planned or Unplanned, so the two never overlap). Within a series the notices come in a
// fixed order (reminders from the longest lead to the shortest, then due, then overdue), so
// the last notice stored for the entity tells everything that was sent in its series: a
// notice is due when it is the current stage of the series and comes after that last one.

// sent is what a stored notice says about its series: which series, and how far it got.
type sent struct {
	Series string
	Kind   domain.NoticeKind
	Lead   int64 // seconds, reminders only
}

// sentOf reads a stored notice's id; ok is false for an id that is not a notice id.
func sentOf(noticeID string) (sent, bool) {
	_, kind, series, lead, err := domain.ParseNoticeID(noticeID)
	if err != nil {
		return sent{}, false
	}
	return sent{Series: series, Kind: kind, Lead: lead}, true
}

// rank orders the kinds within a series.
func rank(k domain.NoticeKind) int {
	switch k {
	case domain.NoticeReminder:
		return 0
	case domain.NoticeDue:
		return 1
	case domain.NoticeOverdue:
		return 2
	default: // stuck: alone in its series
		return 3
	}
}

// after reports whether a is a later stage of a series than b.
func after(a, b sent) bool {
	if rank(a.Kind) != rank(b.Kind) {
		return rank(a.Kind) > rank(b.Kind)
	}
	// Reminders: a shorter lead comes later.
	return a.Kind == domain.NoticeReminder && a.Lead < b.Lead
}

// windowSeries names the series of an announced window: its start and end, and when the
// entity became Pending. A later Pending that keeps the window (a new reason) stays in the
// series; one with another window, or the same window announced again after the entity left
// Pending, starts a new one.
func windowSeries(r domain.Record) string {
	return "w" + digest(r.Window.Start.UTC().Format(time.RFC3339Nano), r.Window.End.UTC().Format(time.RFC3339Nano), r.StateSince.UTC().Format(time.RFC3339Nano))
}

// updateSeries names the series of the update in progress: the command that started it (its
// sequence in the commands stream) and when it was applied.
func updateSeries(r domain.Record) string {
	return "u" + digest(strconv.FormatUint(r.LastCommandSeq, 10), r.UpdatedAt.UTC().Format(time.RFC3339Nano))
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// judgedAt is when a run at tick judges a record revision stored at stored: a record written
// after the tick's time (commands keep arriving while a run reads) is judged, and its notice
// dated, as of when it was stored, so that no notice predates what it reports. Both times are
// the server's (the tick's is when NATS stored it): a writer's clock that runs ahead never moves
// a judgement into the future. Only the notice's at and stage follow from it, never its id:
// the id names the series, kind and rung alone.
func judgedAt(tick, stored time.Time) time.Time {
	if stored.After(tick) {
		return stored
	}
	return tick
}

// stage is the notice that the record calls for at now, whether or not it was sent already:
// the latest stage its series has reached. ok is false when nothing applies. Only the latest
// stage is ever sent: a window announced late, or a function that did not run for a while,
// skips the stages that are already stale instead of sending a burst of them.
//
// ladder must be sorted from the longest lead to the shortest (Config.withDefaults does).
func stage(key string, r domain.Record, now time.Time, ladder []time.Duration, stuckAfter time.Duration) (domain.Notice, bool) {
	n := domain.Notice{ResourceID: r.ResourceID, State: r.State, Window: r.Window, StateSince: r.StateSince, At: now}
	switch {
	case r.Forgotten():
		return domain.Notice{}, false
	case r.Updating:
		if !r.Stuck(now, stuckAfter) {
			return domain.Notice{}, false
		}
		n.Kind = domain.NoticeStuck
	case r.State == domain.StatePending && r.Window != nil:
		switch {
		case r.Overdue(now):
			n.Kind = domain.NoticeOverdue
		case !now.Before(r.Window.Start):
			n.Kind = domain.NoticeDue
		default:
			// The shortest lead whose time has come: window.start − L ≤ now.
			var lead time.Duration
			for _, l := range ladder {
				if !now.Before(r.Window.Start.Add(-l)) {
					lead = l
				}
			}
			if lead == 0 {
				return domain.Notice{}, false
			}
			n.Kind, n.Lead = domain.NoticeReminder, int64(lead/time.Second)
		}
	default:
		return domain.Notice{}, false
	}
	// The series is named only once a stage applies: most records on most ticks have none.
	var series string
	if n.Kind == domain.NoticeStuck {
		series = updateSeries(r)
	} else {
		series = windowSeries(r)
	}
	n.NoticeID = domain.NoticeID(key, n.Kind, series, time.Duration(n.Lead)*time.Second)
	return n, true
}

// decide returns the notice to publish for the record at now, given the last notice stored
// for the entity (nil when there is none): the record's current stage, unless the last notice
// is of the same series and at that stage or later.
func decide(key string, r domain.Record, now time.Time, ladder []time.Duration, stuckAfter time.Duration, last *sent) (domain.Notice, bool) {
	n, ok := stage(key, r, now, ladder, stuckAfter)
	if !ok {
		return domain.Notice{}, false
	}
	if last != nil && covers(*last, n) {
		return domain.Notice{}, false
	}
	return n, true
}

// covers reports whether last, the last notice stored for the entity, is n's stage or later
// in n's series.
func covers(last sent, n domain.Notice) bool {
	s, _ := sentOf(n.NoticeID)
	return last.Series == s.Series && !after(s, last)
}
