package domain

import (
	"strconv"
	"time"
)

// Outcome is what became of a command.
type Outcome string

// Outcomes of the messaging contract (README).
const (
	OutcomeApplied      Outcome = "applied"
	OutcomeRejected     Outcome = "rejected"
	OutcomeDuplicate    Outcome = "duplicate"
	OutcomeDeadLettered Outcome = "dead_lettered"
)

// Event is the outcome event published once per command on maint.evt.<key>.
type Event struct {
	CommandID  string    `json:"commandId"`
	ResourceID string    `json:"resourceId"`
	Task       Task      `json:"task"`
	Outcome    Outcome   `json:"outcome"`
	From       State     `json:"from"`
	To         State     `json:"to"`
	Code       Code      `json:"code"`
	Message    string    `json:"message"`
	Target     string    `json:"target"`
	Revision   uint64    `json:"revision"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Force      bool      `json:"force"`
	Reason     string    `json:"reason,omitempty"`
	// Error is the error text an UpdateFailed command reported (for the audit history).
	Error string `json:"error,omitempty"`
	// CommandSeq is the command's sequence in MAINT_COMMANDS.
	CommandSeq uint64 `json:"commandSeq,omitempty"`
	// Campaign is the campaign of the entity's window around the command (EventCampaign).
	Campaign *CampaignRef `json:"campaign,omitempty"`
	// Override is "policy" when force let through a command that the customer's policy in
	// force refused (urgent work).
	Override string `json:"override,omitempty"`

	// Annotations (Annotate): Category is "planned" or "unplanned" on update tasks and their
	// outcomes; InWindow, on those when the entity had an announced window, whether the
	// command's stored time lies inside it; ActionRequired, whether the entity entered
	// CustomerActionNeeded.
	Category       string `json:"category,omitempty"`
	InWindow       Known  `json:"inWindow,omitzero"`
	ActionRequired bool   `json:"actionRequired,omitempty"`
}

// OutcomeMsgID is the de-duplication id (Nats-Msg-Id, ce-id) of the outcome of the command
// stored at seq: the command id and that sequence, the same on every redelivery of that stored
// command (so the events stream keeps one copy) and different for a copy of the command stored
// again later. A body without a readable id is named by its sequence alone.
func OutcomeMsgID(commandID string, seq uint64) string {
	if ValidID(commandID) {
		return commandID + ":" + strconv.FormatUint(seq, 10)
	}
	return "seq-" + strconv.FormatUint(seq, 10)
}

// EncodeEvent marshals an event.
func EncodeEvent(e Event) ([]byte, error) { return encodeJSON("event", e) }

// DecodeEvent unmarshals an event.
func DecodeEvent(b []byte) (Event, error) { return decodeJSON[Event]("event", b) }

// Applied builds the outcome event of a command that moved the entity along tr.
func Applied(c Command, tr Transition, at time.Time) Event {
	ev := Event{
		CommandID: c.ID, ResourceID: c.ResourceID, Task: c.Task, Outcome: OutcomeApplied,
		From: tr.From, To: tr.To, At: at, Actor: c.Actor, Force: c.Force, Reason: c.Reason, Error: c.Error,
	}
	if tr.Forced {
		ev.Message = "forced: the update in progress was abandoned"
	}
	return ev
}

// Duplicate builds the outcome event of a command whose id the entity already applied.
func Duplicate(c Command, state State, at time.Time) Event {
	return Event{
		CommandID: c.ID, ResourceID: c.ResourceID, Task: c.Task, Outcome: OutcomeDuplicate,
		From: state, To: state, Message: "command id was applied before; nothing changed",
		At: at, Actor: c.Actor, Force: c.Force, Reason: c.Reason,
	}
}

// DeadLettered builds the outcome event of a command given up on, for the reason given; state
// is the entity's when it could be read, "" when not.
func DeadLettered(c Command, state State, reason string, at time.Time) Event {
	return Event{
		CommandID: c.ID, ResourceID: c.ResourceID, Task: c.Task, Outcome: OutcomeDeadLettered,
		From: state, To: state, Message: reason, At: at, Actor: c.Actor, Force: c.Force,
	}
}

// Rejected builds the rejection event for a command in the given (unchanged) state.
func Rejected(c Command, state State, rej *Rejection, at time.Time) Event {
	return Event{
		CommandID: c.ID, ResourceID: c.ResourceID, Task: c.Task, Outcome: OutcomeRejected,
		From: state, To: state, Code: rej.Code, Message: rej.Message, Target: rej.Target,
		At: at, Actor: c.Actor, Force: c.Force, Reason: c.Reason, Error: c.Error,
	}
}
