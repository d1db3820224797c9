package campaign

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"maintsignals/shared/domain"
)

// Message is a campaign event the function decided to publish on maint.campaign.evt.<id>: a
// lifecycle event or a campaign command's outcome. A decision's messages are written in the
// campaign's record with the state it decided (its outbox), then published under their ids,
// then cleared: a crash in between publishes them on the next pass, once (the last message
// of the subject says how far the outbox got).
type Message struct {
	ID   string          `json:"id"`   // Nats-Msg-Id and ce-id
	Type string          `json:"type"` // ce-type
	Time time.Time       `json:"time"` // ce-time
	Body json.RawMessage `json:"body"`
}

// Applied is a campaign command applied to the campaign: its id and stream sequence.
type Applied struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}

// MaxRemembered bounds Campaign.Commands.
const MaxRemembered = 256

// Remembered is the applied command of id, if the campaign remembers it.
func (c *Campaign) Remembered(id string) (Applied, bool) {
	i := slices.IndexFunc(c.Commands, func(a Applied) bool { return a.ID == id })
	if i < 0 {
		return Applied{}, false
	}
	return c.Commands[i], true
}

// Remember records an applied command, keeping the newest MaxRemembered.
func (c *Campaign) Remember(a Applied) {
	c.Commands = append(c.Commands, a)
	if n := len(c.Commands); n > MaxRemembered {
		c.Commands = slices.Clone(c.Commands[n-MaxRemembered:])
	}
}

// Outcome is the body of a campaign command's outcome event (ce-type OutcomeType), like the
// outcome event of an entity's command: the command, what became of it and why, and the
// campaign's status after it.
type Outcome struct {
	CommandID  string         `json:"commandId"`
	Campaign   string         `json:"campaign"`
	Action     Action         `json:"action"`
	Outcome    domain.Outcome `json:"outcome"`
	Code       domain.Code    `json:"code"`
	Message    string         `json:"message"`
	Target     string         `json:"target"`
	Status     Status         `json:"status,omitempty"`
	Generation int            `json:"generation,omitempty"`
	At         time.Time      `json:"at"`
	Actor      string         `json:"actor"`
	CommandSeq uint64         `json:"commandSeq,omitempty"`
}

// OutcomeMessage is the outcome o as a message, its id the command's id and sequence (the
// same on every redelivery of that stored command; a copy stored again is told apart).
func OutcomeMessage(o Outcome) (Message, error) {
	b, err := encode("campaign outcome", o)
	id := OutcomeMessageID(o.CommandID, o.CommandSeq, o.Outcome)
	return Message{ID: id, Type: OutcomeType(o.Outcome), Time: o.At, Body: b}, err
}

// OutcomeMessageID is the id of a campaign command's outcome event: <command id>:<seq>, with
// ":dup" for a duplicate.
func OutcomeMessageID(commandID string, seq uint64, o domain.Outcome) string {
	id := commandID + ":" + itoa(seq)
	if !domain.ValidID(commandID) {
		id = "seq-" + itoa(seq)
	}
	if o == domain.OutcomeDuplicate {
		id += ":dup"
	}
	return id
}

// Message is the lifecycle event as a message.
func (e Event) Message() (Message, error) {
	b, err := e.Encode()
	return Message{ID: e.ID, Type: string(e.Type), Time: e.At, Body: b}, err
}

// Messages are the lifecycle events as messages, in order.
func Messages(evs []Event) ([]Message, error) {
	out := make([]Message, 0, len(evs))
	for _, e := range evs {
		m, err := e.Message()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
