package domain

import "time"

// CloudEvents 1.0 in binary content mode (README, Integrating): the attributes travel as ce-* headers next
// to the unchanged JSON body, so readers that ignore headers keep working and integrators can
// rebuild a CloudEvent from any stored event or notice.
const (
	HeaderCESpecVersion = "ce-specversion"
	HeaderCEID          = "ce-id"
	HeaderCESource      = "ce-source"
	HeaderCEType        = "ce-type"
	HeaderCESubject     = "ce-subject"
	HeaderCETime        = "ce-time"
	HeaderContentType   = "content-type"

	CESpecVersion = "1.0"
	CESource      = "maintsignals"
	ContentJSON   = "application/json"
)

// CloudEvents types of outcome events and notices.
const (
	CETypeApplied      = "io.maintsignals.command.applied"
	CETypeRejected     = "io.maintsignals.command.rejected"
	CETypeDuplicate    = "io.maintsignals.command.duplicate"
	CETypeDeadLettered = "io.maintsignals.command.dead_lettered"

	CETypeNoticeReminder = "io.maintsignals.notice.reminder"
	CETypeNoticeDue      = "io.maintsignals.notice.due"
	CETypeNoticeOverdue  = "io.maintsignals.notice.overdue"
	CETypeNoticeStuck    = "io.maintsignals.notice.stuck"
	CETypeNoticeConflict = "io.maintsignals.notice.conflict"
)

// CETypes lists every type, in the order of the README (Integrating).
var CETypes = []string{
	CETypeApplied, CETypeRejected, CETypeDuplicate, CETypeDeadLettered,
	CETypeNoticeReminder, CETypeNoticeDue, CETypeNoticeOverdue, CETypeNoticeStuck, CETypeNoticeConflict,
}

// OutcomeCEType is the CloudEvents type of an outcome event.
func OutcomeCEType(o Outcome) string { return "io.maintsignals.command." + string(o) }

// NoticeCEType is the CloudEvents type of a notice of the given kind (reminder, due, overdue,
// stuck).
func NoticeCEType(kind string) string { return "io.maintsignals.notice." + kind }

// HeaderSetter is a message's headers (nats.Header, http.Header): the domain stays free of a
// transport.
type HeaderSetter interface{ Set(key, value string) }

// SetCloudEventHeaders adds the CloudEvents attributes of one event or notice to h: id is its
// Nats-Msg-Id (so a receiver de-duplicates on the same id JetStream does), subject the resource
// ID, at its time. An empty resource ID (a command whose body could not be read) leaves
// ce-subject out: the attribute is optional but may not be empty.
func SetCloudEventHeaders(h HeaderSetter, ceType, id, resourceID string, at time.Time) {
	h.Set(HeaderCESpecVersion, CESpecVersion)
	h.Set(HeaderCEID, id)
	h.Set(HeaderCESource, CESource)
	h.Set(HeaderCEType, ceType)
	if resourceID != "" {
		h.Set(HeaderCESubject, resourceID)
	}
	if at.IsZero() {
		at = time.Now()
	}
	h.Set(HeaderCETime, at.UTC().Format(time.RFC3339Nano))
	h.Set(HeaderContentType, ContentJSON)
}

// PolicyOutcomeCEType is the CloudEvents type of a policy command's outcome event:
// io.maintsignals.policy.applied, ….rejected, ….duplicate, ….dead_lettered.
func PolicyOutcomeCEType(o Outcome) string { return "io.maintsignals.policy." + string(o) }
