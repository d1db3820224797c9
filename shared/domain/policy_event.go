package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// PolicyAction is what a policy command does to its scope's policy.
type PolicyAction string

// Policy actions: a command with a policy sets it, one with "policy": null deletes it.
const (
	PolicySet    PolicyAction = "set"
	PolicyDelete PolicyAction = "delete"
)

// PolicyEvent is the outcome event of a policy command, published once per command on
// maint.evt.policy.<scope key> (in EventsStream) after the bucket is written.
type PolicyEvent struct {
	CommandID string       `json:"commandId"`
	Scope     string       `json:"scope"`
	Action    PolicyAction `json:"action,omitempty"`
	Outcome   Outcome      `json:"outcome"`
	Code      Code         `json:"code"`
	Message   string       `json:"message"`
	Target    string       `json:"target"`
	// Revision is the bucket revision the command wrote when applied, else the scope's
	// revision as the command found it (0: none).
	Revision uint64    `json:"revision"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	// CommandSeq is the command's sequence in PoliciesStream.
	CommandSeq uint64 `json:"commandSeq,omitempty"`
}

// EncodePolicyEvent marshals a policy outcome event.
func EncodePolicyEvent(e PolicyEvent) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode policy event: %w", err)
	}
	return b, nil
}

// DecodePolicyEvent unmarshals a policy outcome event.
func DecodePolicyEvent(b []byte) (PolicyEvent, error) {
	var e PolicyEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return PolicyEvent{}, fmt.Errorf("decode policy event: %w", err)
	}
	return e, nil
}
