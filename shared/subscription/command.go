package subscription

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Command is a subscription command (README, Tenants): it creates a subscription, or deletes
// one. It is published on maint.subscription.cmd.<located name> with its id as Nats-Msg-Id,
// signed by an admin or by a customer within its scopes. A create carries the signing secret,
// which the bucket keeps apart and no outcome, log or listing ever shows.
type Command struct {
	ID     string                    `json:"id"`
	Action domain.SubscriptionAction `json:"action"`
	Name   string                    `json:"name"`
	// Scope is the prefix whose entities' events and notices the subscription receives: a
	// subscription, a resource group or a resource within one (the rule of policy scopes).
	Scope  string `json:"scope"`
	URL    string `json:"url,omitempty"`
	Secret string `json:"secret,omitempty"`

	Types          []string       `json:"types,omitempty"`
	States         []domain.State `json:"states,omitempty"`
	Categories     []string       `json:"categories,omitempty"`
	InWindow       *bool          `json:"inWindow,omitempty"`
	ActionRequired *bool          `json:"actionRequired,omitempty"`

	Actor    string `json:"actor,omitempty"`
	IssuedAt string `json:"issuedAt,omitempty"`

	// SignerKey is the public key that signed the command, once verified (never read from
	// the body).
	SignerKey string `json:"-"`
	scope     policy.Scope
}

// MaxURLBytes bounds an endpoint's URL.
const MaxURLBytes = 2048

// String never shows the secret, nor the endpoint's path or query.
func (c Command) String() string {
	return fmt.Sprintf("subscription command %s (%s %s, scope %s)", c.ID, c.Action, c.Name, c.Scope)
}

// LogValue keeps the secret out of structured logs.
func (c Command) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Filters are the command's filters.
func (c Command) Filters() Filters {
	return Filters{Types: c.Types, States: c.States, Categories: c.Categories, InWindow: c.InWindow, ActionRequired: c.ActionRequired}
}

// ParsedScope is the command's scope, as DecodeCommand checked it.
func (c Command) ParsedScope() policy.Scope { return c.scope }

// Key is the command's located name, as DecodeCommand checked it.
func (c Command) Key() string {
	return domain.SubscriptionKey(domain.TenantOf(c.scope.Key), c.Name)
}

// Issued returns the parsed IssuedAt; false when absent.
func (c Command) Issued() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, c.IssuedAt)
	return t, err == nil
}

// ParseScope reads a subscription's scope: a policy scope (a subscription, a resource group or
// a whole resource ID, README, customers' maintenance policies) that lies within a
// subscription, the tenant whose tokens its subjects and key carry.
func ParseScope(s string) (policy.Scope, error) {
	sc, why := parseScope(s)
	if why != "" {
		return policy.Scope{}, fmt.Errorf("%w: scope: %s", ErrInvalid, why)
	}
	return sc, nil
}

// parseScope is ParseScope, with why it is not one ("" when it is).
func parseScope(s string) (policy.Scope, string) {
	sc, rej := policy.ParseScope(s)
	switch {
	case rej != nil:
		return policy.Scope{}, rej.Message
	case domain.TenantOf(sc.Key).Subscription == domain.NoToken:
		return policy.Scope{}, fmt.Sprintf("must lie within a subscription (/subscriptions/<id>…), got %q", truncate(s, 80))
	}
	return sc, ""
}

// DecodeCommand reads a subscription command received on the subject of located name key (""
// not to check it), with msgID the value of its Nats-Msg-Id header ("" if none): strictly (no
// key unknown, repeated or cased otherwise), then its fields.
func DecodeCommand(body []byte, key, msgID string) (Command, *domain.Rejection) {
	var c Command
	if rej := domain.DecodeStrict(body, domain.MaxCommandBytes, "subscription command", &c); rej != nil {
		return Command{}, rej
	}
	if rej := c.check(key, msgID); rej != nil {
		return c, rej
	}
	return c, nil
}

func (c *Command) check(key, msgID string) *domain.Rejection {
	if rej := domain.CheckID(c.ID, msgID); rej != nil {
		return rej
	}
	if c.Action != domain.SubscriptionCreate && c.Action != domain.SubscriptionDelete {
		return domain.InvalidParameter("action", "must be %q or %q", domain.SubscriptionCreate, domain.SubscriptionDelete)
	}
	if !ValidName(c.Name) {
		return domain.InvalidParameter("name", "must be 1-64 of [A-Za-z0-9_-]")
	}
	if rej := c.checkScope(key); rej != nil {
		return rej
	}
	var rej *domain.Rejection
	if c.Action == domain.SubscriptionCreate {
		rej = c.checkCreate()
	} else {
		rej = c.checkDelete()
	}
	if rej != nil {
		return rej
	}
	return domain.CheckSender(c.Actor, c.IssuedAt)
}

// checkScope parses the scope and checks that the command came on its located name's subject.
func (c *Command) checkScope(key string) *domain.Rejection {
	if c.Scope == "" {
		return domain.InvalidParameter("scope", "is required")
	}
	sc, why := parseScope(c.Scope)
	if why != "" {
		return domain.InvalidParameter("scope", "%s", why)
	}
	c.scope = sc
	if key != "" && c.Key() != key {
		return domain.InvalidParameter("scope", "with name %q locates %q, but the command was sent on %q", c.Name, truncate(c.Key(), 160), truncate(key, 160))
	}
	return nil
}

// checkCreate checks what a create needs: an HTTPS endpoint, a secret, known filters.
func (c *Command) checkCreate() *domain.Rejection {
	if rej := CheckURL(c.URL); rej != nil {
		return rej
	}
	if c.Secret == "" {
		return domain.InvalidParameter("secret", "is required: the Standard Webhooks secret, made by maintctl")
	}
	if _, err := DecodeSecret(c.Secret); err != nil {
		return domain.InvalidParameter("secret", "%v", err)
	}
	if err := c.Filters().CheckFilters(); err != nil {
		return domain.InvalidParameter(c.Filters().filterTarget(), "%v", err)
	}
	return nil
}

// checkDelete refuses what only a create takes.
func (c *Command) checkDelete() *domain.Rejection {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"url", c.URL != ""}, {"secret", c.Secret != ""}, {"types", len(c.Types) > 0}, {"states", len(c.States) > 0},
		{"categories", len(c.Categories) > 0}, {"inWindow", c.InWindow != nil}, {"actionRequired", c.ActionRequired != nil},
	} {
		if f.set {
			return domain.InvalidParameter(f.name, "is for %s only", domain.SubscriptionCreate)
		}
	}
	return nil
}

// CheckURL checks an endpoint: an absolute https URL with a host and no user information, at
// most MaxURLBytes. Its message never quotes the URL's path or query.
func CheckURL(raw string) *domain.Rejection {
	if raw == "" {
		return domain.InvalidParameter("url", "is required")
	}
	if len(raw) > MaxURLBytes {
		return domain.InvalidParameter("url", "is %d bytes, at most %d", len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "":
		return domain.InvalidParameter("url", "must be an absolute https URL with a host")
	case u.Scheme != "https":
		return domain.InvalidParameter("url", "must be https (got scheme %q): deliveries carry the customer's events", truncate(u.Scheme, 16))
	case u.User != nil:
		return domain.InvalidParameter("url", "must not carry user information")
	}
	return nil
}

// Encode marshals the command as it is published.
func (c Command) Encode() ([]byte, error) { return encode("subscription command", c) }

// Redact is a subscription command's body with its secret replaced by "(redacted)", for
// showing; a body that is not a JSON object is replaced whole.
func Redact(body []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return []byte(`"(a subscription command that does not read)"`)
	}
	if _, ok := m["secret"]; ok {
		m["secret"] = json.RawMessage(`"(redacted)"`)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return []byte(`"(redacted)"`)
	}
	return b
}
