// Package signing signs commands with NATS nkeys (ed25519) and checks them in the command
// and policies functions: a command carries a signature over its exact body, the signer's public
// key names a configured admin, updater or customer, and the role must allow the task (a
// customer's only on the entities and policies of its scopes). The signer's configured name,
// not the body's self-declared actor, becomes the actor.
package signing

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Headers of a signed command.
const (
	HeaderSigner    = "Maint-Signer"    // the signer's public user nkey (U…)
	HeaderSignature = "Maint-Signature" // base64url (no padding) ed25519 signature of the body
)

// Role is what a signer may do.
type Role string

// Roles. Admins announce maintenance, start updates, forget entities and set any policy;
// updaters report an update's outcome; customers set the policies of their scopes and
// reschedule the windows of the entities in them, nothing else; the campaign function
// announces and withdraws its campaigns' windows (Pending and None only).
const (
	RoleAdmin    Role = "admin"
	RoleUpdater  Role = "updater"
	RoleCustomer Role = "customer"
	RoleCampaign Role = "campaign"
)

var knownRoles = []Role{RoleAdmin, RoleUpdater, RoleCustomer, RoleCampaign}

// Allows reports whether the role may send task (a customer, only within its scopes).
func (r Role) Allows(t domain.Task) bool {
	switch r {
	case RoleAdmin:
		k := t.Kind()
		return k == domain.KindSignal || k == domain.KindUpdate || k == domain.KindAdmin || k == domain.KindReschedule
	case RoleUpdater:
		return t.Kind() == domain.KindOutcome
	case RoleCustomer:
		return t == domain.TaskReschedule
	case RoleCampaign:
		return t == domain.TaskPending || t == domain.TaskNone
	}
	return false
}

// Signer is a configured party with its keys. Several keys let a signer rotate: add the new
// key, move to it, remove the old one.
type Signer struct {
	Name       string   `json:"name"`
	PublicKey  string   `json:"publicKey,omitempty"`
	PublicKeys []string `json:"publicKeys,omitempty"`
	Roles      []Role   `json:"roles"`
	// Scopes are a customer's resource-ID prefixes (scopes of policies: a subscription, a
	// resource group or a resource): the entities it may reschedule and whose policies it
	// may set.
	Scopes []string `json:"scopes,omitempty"`

	// Key is the key that signed the command at hand (set by Verify).
	Key string `json:"-"`
	// scopes are Scopes, parsed.
	scopes []policy.Scope
}

// Covers reports whether one of the signer's scopes covers the entity or scope of key.
func (s Signer) Covers(key string) bool {
	return slices.ContainsFunc(s.scopes, func(sc policy.Scope) bool { return sc.Covers(key) })
}

// may reports whether the signer may send task for the entity of key.
func (s Signer) may(t domain.Task, key string) bool {
	return slices.ContainsFunc(s.Roles, func(r Role) bool {
		return r.Allows(t) && (r != RoleCustomer || s.Covers(key))
	})
}

// keys are the signer's public keys, from both fields.
func (s Signer) keys() []string {
	if s.PublicKey == "" {
		return s.PublicKeys
	}
	return append([]string{s.PublicKey}, s.PublicKeys...)
}

// Policy decides which commands are authorized.
type Policy struct {
	// Required refuses unsigned commands (the production setting).
	Required bool
	signers  map[string]Signer
}

// ErrInvalidPolicy is wrapped by configuration errors.
var ErrInvalidPolicy = errors.New("invalid signing policy")

// NewPolicy validates the signers: well-formed user public keys, a name, known roles.
func NewPolicy(required bool, signers []Signer) (*Policy, error) {
	p := &Policy{Required: required, signers: make(map[string]Signer, len(signers))}
	for _, s := range signers {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: signer %v has no name", ErrInvalidPolicy, s.keys())
		}
		if len(s.keys()) == 0 {
			return nil, fmt.Errorf("%w: signer %q has no publicKey or publicKeys", ErrInvalidPolicy, s.Name)
		}
		if len(s.Roles) == 0 {
			return nil, fmt.Errorf("%w: signer %q has no role", ErrInvalidPolicy, s.Name)
		}
		if err := s.checkRoles(); err != nil {
			return nil, err
		}
		for _, k := range s.keys() {
			if !nkeys.IsValidPublicUserKey(k) {
				return nil, fmt.Errorf("%w: signer %q: %q is not a public user nkey (U…)", ErrInvalidPolicy, s.Name, k)
			}
			if _, dup := p.signers[k]; dup {
				return nil, fmt.Errorf("%w: key %s listed twice", ErrInvalidPolicy, k)
			}
			p.signers[k] = s
		}
	}
	if required && len(p.signers) == 0 {
		return nil, fmt.Errorf("%w: signatures are required but no signer is configured", ErrInvalidPolicy)
	}
	return p, nil
}

// checkRoles validates the roles and parses the scopes, which a customer needs and no other
// role takes.
func (s *Signer) checkRoles() error {
	for _, r := range s.Roles {
		if !slices.Contains(knownRoles, r) {
			return fmt.Errorf("%w: signer %q: unknown role %q (admin, updater, customer, campaign)", ErrInvalidPolicy, s.Name, r)
		}
	}
	customer := slices.Contains(s.Roles, RoleCustomer)
	switch {
	case customer && len(s.Scopes) == 0:
		return fmt.Errorf("%w: signer %q: a customer needs scopes (resource-ID prefixes such as /subscriptions/<sub>)", ErrInvalidPolicy, s.Name)
	case !customer && len(s.Scopes) > 0:
		return fmt.Errorf("%w: signer %q: scopes are for the customer role only", ErrInvalidPolicy, s.Name)
	}
	s.scopes = nil
	for _, raw := range s.Scopes {
		sc, rej := policy.ParseScope(raw)
		if rej != nil {
			return fmt.Errorf("%w: signer %q: scope %q: %s", ErrInvalidPolicy, s.Name, raw, rej.Message)
		}
		s.scopes = append(s.scopes, sc)
	}
	return nil
}

// LoadPolicy reads signers from a JSON file: [{"name": "…", "publicKeys": ["U…"], "roles":
// ["admin"]}] ("publicKey": "U…" for a single key; a customer adds "scopes": ["/subscriptions/…"]).
func LoadPolicy(path string, required bool) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errInvalid(err)
	}
	return parsePolicy(path, b, required)
}

func errInvalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalidPolicy, err) }

func parsePolicy(path string, b []byte, required bool) (*Policy, error) {
	var signers []Signer
	if err := json.Unmarshal(b, &signers); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidPolicy, path, err)
	}
	return NewPolicy(required, signers)
}

// Verify checks the signature headers against the exact body. It returns the signer (nil for an
// unsigned command that the policy lets through) or an Unauthorized rejection. It runs before
// the body is decoded: an unauthorized sender gets no further.
func (p *Policy) Verify(body []byte, h nats.Header) (*Signer, *domain.Rejection) {
	pub, sig := h.Get(HeaderSigner), h.Get(HeaderSignature)
	if pub == "" && sig == "" {
		if p.Required {
			return nil, unauthorized("the command is not signed; sign it with a configured signer's nkey (%s, %s headers)", HeaderSigner, HeaderSignature)
		}
		return nil, nil
	}
	s, ok := p.signers[pub]
	if !ok {
		return nil, unauthorized("signer %q is not a configured signer", truncate(pub, 60))
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, unauthorized("signature is not base64url: %v", err)
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return nil, unauthorized("signer key: %v", err)
	}
	if err := kp.Verify(body, raw); err != nil {
		return nil, unauthorized("signature does not match the body for signer %s", s.Name)
	}
	s.Key = pub
	return &s, nil
}

// Authorize checks that the signer's roles allow the command's task on its entity (a customer's
// only within its scopes). An unsigned command (nil signer) passes only when signatures are
// not required (Verify has refused it otherwise).
func (p *Policy) Authorize(s *Signer, c domain.Command) *domain.Rejection {
	if s == nil {
		return nil
	}
	key, err := domain.Key(c.ResourceID)
	if err == nil && s.may(c.Task, key) {
		return nil
	}
	if slices.Contains(s.Roles, RoleCustomer) && c.Task == domain.TaskReschedule {
		return unauthorized("signer %s may reschedule only the entities of its scopes %v", s.Name, s.Scopes)
	}
	return unauthorized("signer %s (%v) may not send task %s", s.Name, s.Roles, c.Task)
}

// AuthorizePolicy checks that the signer may set or delete the policy of scope: an admin any,
// a customer those its scopes cover. An unsigned command (nil signer) passes as in Authorize.
func (p *Policy) AuthorizePolicy(s *Signer, scope policy.Scope) *domain.Rejection {
	switch {
	case s == nil, slices.Contains(s.Roles, RoleAdmin):
		return nil
	case slices.Contains(s.Roles, RoleCustomer) && s.Covers(scope.Key):
		return nil
	case slices.Contains(s.Roles, RoleCustomer):
		return unauthorized("signer %s may set the policies of its scopes %v only, not of %s", s.Name, s.Scopes, scope.ID)
	}
	return unauthorized("signer %s (%v) may not set policies: an admin or a customer within its scopes may", s.Name, s.Roles)
}

// Msg is a command's message on subject: its body, its id in Nats-Msg-Id (so that the stream
// de-duplicates a resend) and, with kp (nil: unsigned), its signature headers.
func Msg(kp nkeys.KeyPair, subject, id string, body []byte) (*nats.Msg, error) {
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(domain.HeaderMsgID, id)
	if kp != nil {
		if err := Sign(kp, body, m.Header); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Sign signs body with the seed's key and sets the headers on h.
func Sign(kp nkeys.KeyPair, body []byte, h nats.Header) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sig, err := kp.Sign(body)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	h.Set(HeaderSigner, pub)
	h.Set(HeaderSignature, base64.RawURLEncoding.EncodeToString(sig))
	return nil
}

// LoadSeed reads a user nkey seed (SU…) from a file.
func LoadSeed(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nkey seed: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fmt.Errorf("nkey seed %s: %w", path, err)
	}
	return kp, nil
}

func unauthorized(format string, args ...any) *domain.Rejection {
	return &domain.Rejection{Code: domain.CodeUnauthorized, Message: fmt.Sprintf(format, args...)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// AuthorizeSubscription checks that the signer may create or delete a webhook subscription of
// scope (README, Tenants): an admin any, a customer those its scopes cover. An unsigned
// command (nil signer) passes as in Authorize.
func (p *Policy) AuthorizeSubscription(s *Signer, scope policy.Scope) *domain.Rejection {
	switch {
	case s == nil, slices.Contains(s.Roles, RoleAdmin):
		return nil
	case slices.Contains(s.Roles, RoleCustomer) && s.Covers(scope.Key):
		return nil
	case slices.Contains(s.Roles, RoleCustomer):
		return unauthorized("signer %s may manage the webhook subscriptions of its scopes %v only, not of %s", s.Name, s.Scopes, scope.ID)
	}
	return unauthorized("signer %s (%v) may not manage webhook subscriptions: an admin or a customer within its scopes may", s.Name, s.Roles)
}
