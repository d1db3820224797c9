package campaign

import (
	"strconv"
	"strings"
	"time"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// EventType is a lifecycle event's CloudEvents type (ce-type), also its body's "type".
type EventType string

// Lifecycle events of a campaign.
const (
	EventCreated   EventType = "io.maintsignals.campaign.created"
	EventPaused    EventType = "io.maintsignals.campaign.paused"
	EventResumed   EventType = "io.maintsignals.campaign.resumed"
	EventApproved  EventType = "io.maintsignals.campaign.approved"
	EventRetried   EventType = "io.maintsignals.campaign.retried"
	EventHalted    EventType = "io.maintsignals.campaign.halted"
	EventCancelled EventType = "io.maintsignals.campaign.cancelled"
	EventCompleted EventType = "io.maintsignals.campaign.completed"
	EventProgress  EventType = "io.maintsignals.campaign.progress"
)

// EventTypes lists every lifecycle event type.
var EventTypes = []EventType{EventCreated, EventPaused, EventResumed, EventApproved, EventRetried, EventHalted, EventCancelled, EventCompleted, EventProgress}

// OutcomeType is the CloudEvents type of a campaign command's outcome event:
// io.maintsignals.campaign.command.applied, ….rejected, ….duplicate.
func OutcomeType(o domain.Outcome) string { return "io.maintsignals.campaign.command." + string(o) }

// Short is the type's last word ("progress").
func (t EventType) Short() string { return string(t)[strings.LastIndexByte(string(t), '.')+1:] }

// Event is a lifecycle event of a campaign, published on maint.campaign.evt.<id> with
// Nats-Msg-Id (and ce-id) ID.
type Event struct {
	ID         string    `json:"-"`
	Campaign   string    `json:"campaign"`
	Type       EventType `json:"type"`
	Status     Status    `json:"status"`
	Generation int       `json:"generation"`
	Phases     Counts    `json:"phases"`
	At         time.Time `json:"at"`
	// Wave is the wave approved or halted.
	Wave string `json:"wave,omitempty"`
	// Phase is the phase retried.
	Phase Phase `json:"phase,omitempty"`
	// Done is, for progress, the tenths of the selection done (1 to 10).
	Done int `json:"done,omitempty"`
}

// Encode marshals the event's body.
func (e Event) Encode() ([]byte, error) { return encode("campaign event", e) }

// Subject is where the event is published.
func (e Event) Subject() string { return domain.CampaignEventSubject(e.Campaign) }

// emit appends a lifecycle event of the campaign as it now stands, numbered by its count of
// events: campaign.<id>.<n>.<type> (deterministic: a crash before the campaign's new state
// is written makes the same events again, with the same ids).
func (c *Campaign) emit(out []Event, t EventType, phases Counts, at time.Time) []Event {
	c.Events++
	return append(out, Event{
		ID: "campaign." + c.ID + "." + strconv.Itoa(c.Events) + "." + t.Short(), Campaign: c.ID, Type: t,
		Status: c.Status, Generation: c.Generation, Phases: phases, At: at,
	})
}

// Effects are what the function must publish for a decision, in order, before it writes the
// state the decision returned: commands to entities and lifecycle events, all with
// deterministic ids.
type Effects struct {
	// Duplicate: the command is the same as one applied before; its outcome is duplicate.
	Duplicate bool
	Commands  []admission.Command
	Events    []Event
}

// CETypes lists the CloudEvents types of a campaign's events: its commands' outcomes, then
// its lifecycle events.
func CETypes() []string {
	out := []string{OutcomeType(domain.OutcomeApplied), OutcomeType(domain.OutcomeRejected), OutcomeType(domain.OutcomeDuplicate), OutcomeType(domain.OutcomeDeadLettered)}
	for _, t := range EventTypes {
		out = append(out, string(t))
	}
	return out
}
