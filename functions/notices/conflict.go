package notices

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
	"maintsignals/shared/store"
)

// Conflict notices (customers' maintenance policies): a policy that changes under an announced
// window and no longer allows it gets one notice of kind conflict per entity, window and policy
// revision. They share the entity's subject with the lifecycle notices, and each kind of notice
// carries in a header where the other kind got (domain.HeaderNoticeLifecycle,
// domain.HeaderNoticeConflict): so the entity's last notice still says everything that was sent,
// and one read, one compare-and-swap publish per notice, make conflicts exactly once as they
// make the lifecycle notices.

// memo is what the last notice stored for an entity says: the id of its last lifecycle notice
// and of its last conflict notice ("" for none).
type memo struct {
	life, conflict string
}

// lifecycle is how far the entity's lifecycle series got (nil: nothing sent).
func (m memo) lifecycle() *sent {
	s, ok := sentOf(m.life)
	if !ok {
		return nil
	}
	return &s
}

// with is the memo once nt is stored after what m says.
func (m memo) with(nt domain.Notice) memo {
	if nt.Kind == domain.NoticeConflict {
		m.conflict = nt.NoticeID
	} else {
		m.life = nt.NoticeID
	}
	return m
}

// covers reports whether m says that the entity's current stages are sent: its lifecycle stage
// life (when hasLife) and its conflict c (when hasConflict).
func (m memo) covers(life domain.Notice, hasLife bool, c domain.Notice, hasConflict bool) bool {
	if hasConflict && m.conflict != c.NoticeID {
		return false
	}
	if !hasLife {
		return true
	}
	last := m.lifecycle()
	return last != nil && covers(*last, life)
}

// memoOf reads a stored notice and its headers.
func memoOf(nt domain.Notice, h nats.Header) memo {
	if nt.Kind == domain.NoticeConflict {
		return memo{life: h.Get(domain.HeaderNoticeLifecycle), conflict: nt.NoticeID}
	}
	return memo{life: nt.NoticeID, conflict: h.Get(domain.HeaderNoticeConflict)}
}

// setMemo writes on a notice about to be published where the other kind got.
func setMemo(h nats.Header, nt domain.Notice, m memo) {
	switch {
	case nt.Kind == domain.NoticeConflict && m.life != "":
		h.Set(domain.HeaderNoticeLifecycle, m.life)
	case nt.Kind != domain.NoticeConflict && m.conflict != "":
		h.Set(domain.HeaderNoticeConflict, m.conflict)
	}
}

// conflictNotice is the conflict notice of the entity's window under the policy p of revision
// rev (why: what p says of the window). Its id names the window's series and the revision.
func conflictNotice(key string, r domain.Record, now time.Time, p *policy.Policy, rev uint64, why string) domain.Notice {
	series := windowSeries(r) + "r" + strconv.FormatUint(rev, 10)
	return domain.Notice{
		NoticeID: domain.NoticeID(key, domain.NoticeConflict, series, 0), Kind: domain.NoticeConflict,
		ResourceID: r.ResourceID, State: r.State, Window: r.Window, StateSince: r.StateSince, At: now,
		Policy:  &domain.PolicyRef{Scope: p.Scope().ID, Revision: rev},
		Message: "the window " + why + " of the policy for " + p.Scope().ID,
	}
}

// conflictOf is the conflict notice the record calls for at now under the policy in force as
// the view holds it; false when there is none.
func conflictOf(view *store.Policies, key string, r domain.Record, now time.Time) (domain.Notice, bool) {
	why, p, rev := view.Conflict(key, r, now)
	if why == "" {
		return domain.Notice{}, false
	}
	return conflictNotice(key, r, now, p, rev.Seq, why), true
}

// next is the notice to publish after what m says: the lifecycle stage first, then the
// conflict; false when both are sent.
func next(key string, r domain.Record, now time.Time, cfg Config, c domain.Notice, hasConflict bool, m memo) (domain.Notice, bool) {
	if nt, ok := decide(key, r, now, cfg.Remind, cfg.StuckAfter, m.lifecycle()); ok {
		return nt, true
	}
	if hasConflict && m.conflict != c.NoticeID {
		return c, true
	}
	return domain.Notice{}, false
}
