package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"maintsignals/shared/domain"
)

// Command is a policy command (README, customers' maintenance policies): it sets the policy of
// a scope, or deletes it ("policy": null). It is published on maint.policy.<scope key> with
// its id as Nats-Msg-Id.
type Command struct {
	ID    string `json:"id"`
	Scope string `json:"scope"`
	// Policy is the document to set; nil deletes the scope's policy.
	Policy   *Document `json:"policy"`
	Actor    string    `json:"actor,omitempty"`
	IssuedAt string    `json:"issuedAt,omitempty"`

	// SignerKey is the public key that signed the command, once verified (never read from
	// the body).
	SignerKey string `json:"-"`
	// scope is Scope, parsed.
	scope Scope
}

var commandKeys = []string{"id", "scope", "policy", "actor", "issuedAt"}

// wireCommand keeps the policy as written, for Decode to read strictly.
type wireCommand struct {
	ID       string          `json:"id"`
	Scope    string          `json:"scope"`
	Policy   json.RawMessage `json:"policy"`
	Actor    string          `json:"actor"`
	IssuedAt string          `json:"issuedAt"`
}

// Action is what the command does.
func (c Command) Action() domain.PolicyAction {
	if c.Policy == nil {
		return domain.PolicyDelete
	}
	return domain.PolicySet
}

// ParsedScope is the command's scope, as DecodeCommand checked it.
func (c Command) ParsedScope() Scope { return c.scope }

// Issued returns the parsed IssuedAt; false when absent.
func (c Command) Issued() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, c.IssuedAt)
	return t, err == nil
}

// DecodeCommand reads a policy command received on the subject of scope key key ("" not to
// check it), with msgID the value of its Nats-Msg-Id header ("" if none): strictly (no key
// unknown, repeated or cased otherwise), then its fields. The policy, when there is one, is
// read as Decode reads a document; its scope may be left out (it is the command's) and must
// otherwise be the command's. Compile checks the policy's values.
func DecodeCommand(body []byte, key, msgID string) (Command, *domain.Rejection) {
	if rej := checkBody(body, "body"); rej != nil {
		return Command{}, rej
	}
	var w wireCommand
	if rej := decodeObject(body, "body", "", commandKeys, &w); rej != nil {
		if rej.Target == "body" {
			rej.Code, rej.Target = domain.CodeInvalidRequestContent, ""
		}
		return Command{}, rej
	}
	c := Command{ID: w.ID, Scope: w.Scope, Actor: w.Actor, IssuedAt: w.IssuedAt}
	if rej := c.check(key, msgID, hasKey(body, "policy")); rej != nil {
		return c, rej
	}
	if raw := bytes.TrimSpace(w.Policy); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		doc, rej := Decode(raw)
		if rej != nil {
			return c, rej
		}
		switch {
		case doc.Scope == "":
			doc.Scope = c.Scope
		case !sameScope(doc.Scope, c.scope):
			return c, domain.InvalidParameter("scope", "the policy's scope %q is not the command's %q", truncate(doc.Scope, 80), truncate(c.Scope, 80))
		}
		doc.Scope = c.Scope
		c.Policy = &doc
	}
	return c, nil
}

func (c *Command) check(key, msgID string, hasPolicy bool) *domain.Rejection {
	if rej := domain.CheckID(c.ID, msgID); rej != nil {
		return rej
	}
	if c.Scope == "" {
		return domain.InvalidParameter("scope", "is required")
	}
	scope, rej := ParseScope(c.Scope)
	if rej != nil {
		return rej
	}
	if key != "" && scope.Key != key {
		return domain.InvalidParameter("scope", "encodes to key %q, but the command was sent on subject key %q", truncate(scope.Key, 64), truncate(key, 64))
	}
	c.scope = scope
	if !hasPolicy {
		return domain.InvalidParameter("policy", "is required: the policy to set, or null to delete the scope's policy")
	}
	return domain.CheckSender(c.Actor, c.IssuedAt)
}

// sameScope reports whether s names scope (case-insensitively, as scopes compare).
func sameScope(s string, scope Scope) bool {
	k, err := domain.Key(s)
	return err == nil && k == scope.Key
}

// hasKey reports whether the JSON object body has the key (checkKeys has read it).
func hasKey(body []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// Compile compiles the command's policy as set at storedAt, the command's stored time: every
// field, then the 48/32 rule from then (CheckOpen). nil for a delete.
func (c Command) Compile(storedAt time.Time) (*Policy, *domain.Rejection) {
	if c.Policy == nil {
		return nil, nil
	}
	p, rej := c.Policy.Compile()
	if rej != nil {
		return nil, rej
	}
	if rej := p.CheckOpen(storedAt); rej != nil {
		return nil, rej
	}
	return p, nil
}

// Encode marshals the command as it is published.
func (c Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode policy command: %w", err)
	}
	return b, nil
}
