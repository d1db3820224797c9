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
func EncodePolicyEvent(e PolicyEvent) ([]byte, error) { return encodeJSON("policy event", e) }

// DecodePolicyEvent unmarshals a policy outcome event.
func DecodePolicyEvent(b []byte) (PolicyEvent, error) {
	return decodeJSON[PolicyEvent]("policy event", b)
}

// HeaderPolicyMeta is the header of a policy revision in the bucket: its PolicyMeta, as JSON.
// The value stays the policy document alone.
const HeaderPolicyMeta = "Maint-Policy"

// PolicyMeta is what a policy revision says of how it was written: the ledger of the policy
// commands of its scope (exactly-once), the revision it replaced and who wrote it.
type PolicyMeta struct {
	Ledger
	// Prev is the bucket revision this one replaced (0: the scope's first): a reader that
	// keeps fewer revisions can tell whether older ones existed.
	Prev uint64 `json:"prev,omitempty"`
	// Actor is who set or deleted the policy (the signer's name when signed).
	Actor string `json:"actor,omitempty"`
	// At is when the command was applied: the time of its outcome event, which a redelivery
	// publishes again as it was.
	At time.Time `json:"at,omitzero"`
}

// EncodePolicyMeta marshals the header's value (JSON has no line breaks: a header value may
// hold it).
func EncodePolicyMeta(m PolicyMeta) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode policy meta: %w", err)
	}
	return string(b), nil
}

// DecodePolicyMeta reads the header's value; an empty one is a revision written by hand (no
// ledger).
func DecodePolicyMeta(s string) (PolicyMeta, error) {
	var m PolicyMeta
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return PolicyMeta{}, fmt.Errorf("decode policy meta: %w", err)
	}
	return m, nil
}

// Answers is the command the event answers: its id and its sequence in MAINT_POLICIES.
func (e PolicyEvent) Answers() (id string, seq uint64) { return e.CommandID, e.CommandSeq }

// CloudEvent is the event's CloudEvents type and source, and its time.
func (e PolicyEvent) CloudEvent() (ceType, source string, at time.Time) {
	return PolicyOutcomeCEType(e.Outcome), e.Scope, e.At
}
