package domain

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Names of the notices (README, Time in the signal).
const (
	NoticesStream = "MAINT_NOTICES"
	NoticePrefix  = "maint.notice."
)

// NoticeSubject is where the notices of an entity key are published:
// maint.notice.<cell>.<subscription>.<group>.<key> (Layout), in its cell's notices stream.
func NoticeSubject(key string) string {
	return NoticePrefix + CellOf(key).String() + "." + Located(key)
}

// NoticeKind is what a lifecycle notice says.
type NoticeKind string

// Notice kinds.
const (
	// NoticeReminder: the announced window starts within the notice's lead time.
	NoticeReminder NoticeKind = "reminder"
	// NoticeDue: the window has started and the entity is still Pending.
	NoticeDue NoticeKind = "due"
	// NoticeOverdue: the window has ended and the entity is still Pending.
	NoticeOverdue NoticeKind = "overdue"
	// NoticeStuck: an update has been in progress for longer than the stuck limit.
	NoticeStuck NoticeKind = "stuck"
	// NoticeConflict: a customer's policy changed under the announced window and no longer
	// allows it; once per entity, window and policy revision.
	NoticeConflict NoticeKind = "conflict"
)

// NoticeKinds lists the notice kinds.
var NoticeKinds = []NoticeKind{NoticeReminder, NoticeDue, NoticeOverdue, NoticeStuck, NoticeConflict}

// Headers of a notice that say how far the entity's two kinds of notices got, so that the
// last notice of an entity tells both: its lifecycle series (reminders, due, overdue, stuck)
// and its conflicts.
const (
	// HeaderNoticeLifecycle, on a conflict notice, is the id of the entity's last lifecycle
	// notice before it ("" when none).
	HeaderNoticeLifecycle = "Maint-Notice-Lifecycle"
	// HeaderNoticeConflict, on a lifecycle notice, is the id of the entity's last conflict
	// notice before it ("" when none).
	HeaderNoticeConflict = "Maint-Notice-Conflict"
)

// PolicyRef names a revision of a customer's policy.
type PolicyRef struct {
	Scope    string `json:"scope"`
	Revision uint64 `json:"revision"`
}

// Notice is a lifecycle notice, published on maint.notice.<key>.
type Notice struct {
	// NoticeID is <key>:<kind>:<series>:<lead seconds>, the same for every attempt to publish
	// this notice; it is also the message's Nats-Msg-Id.
	NoticeID   string     `json:"noticeId"`
	Kind       NoticeKind `json:"kind"`
	ResourceID string     `json:"resourceId"`
	State      State      `json:"state"`
	Window     *Window    `json:"window,omitempty"`
	StateSince time.Time  `json:"stateSince"`
	// Lead is the reminder's lead time in seconds (0 for the other kinds).
	Lead int64 `json:"lead"`
	// At is when the notice was decided: the time of the tick's run, or the time the record
	// revision it judged was stored when that is later (a record written during the run), so
	// that a notice never predates what it reports.
	At time.Time `json:"at"`
	// Policy and Message, on a conflict notice: the revision of the policy in force and why it
	// does not allow the window.
	Policy  *PolicyRef `json:"policy,omitempty"`
	Message string     `json:"message,omitempty"`
}

// NoticeID builds the id of a notice of kind for entity key in series (a window or an
// update, see the notices function), with lead the reminder's lead time.
func NoticeID(key string, kind NoticeKind, series string, lead time.Duration) string {
	return key + ":" + string(kind) + ":" + series + ":" + strconv.FormatInt(int64(lead/time.Second), 10)
}

// ParseNoticeID splits a notice id into its parts. Keys hold no ':', so the last three
// fields are unambiguous.
func ParseNoticeID(id string) (key string, kind NoticeKind, series string, leadSeconds int64, err error) {
	parts := strings.Split(id, ":")
	if len(parts) != 4 || parts[0] == "" || parts[2] == "" {
		return "", "", "", 0, fmt.Errorf("notice id %q is not key:kind:series:lead", id)
	}
	lead, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil || lead < 0 {
		return "", "", "", 0, fmt.Errorf("notice id %q: lead %q is not a number of seconds", id, parts[3])
	}
	return parts[0], NoticeKind(parts[1]), parts[2], lead, nil
}

// EncodeNotice marshals a notice.
func EncodeNotice(n Notice) ([]byte, error) { return encodeJSON("notice", n) }

// DecodeNotice unmarshals a notice.
func DecodeNotice(b []byte) (Notice, error) { return decodeJSON[Notice]("notice", b) }
