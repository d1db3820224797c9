// Package subscription is the self-service webhook subscription (README, Tenants): what a
// subscription command says, what the bucket keeps of a subscription, and the checks of its
// fields, which the subscriptions function, the webhook function and maintctl share.
package subscription

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

// Filters are what a subscription delivers (README, Integrating): the ce-type values (empty:
// every type), the resulting states (empty: every state), and the events' annotations
// (categories; inWindow and actionRequired when set).
type Filters struct {
	Types          []string       `json:"types,omitempty"`
	States         []domain.State `json:"states,omitempty"`
	Categories     []string       `json:"categories,omitempty"`
	InWindow       *bool          `json:"inWindow,omitempty"`
	ActionRequired *bool          `json:"actionRequired,omitempty"`
}

// Record is a subscription as the bucket keeps it, under its located name: everything but its
// secret, which the secrets bucket keeps for the webhook function alone.
type Record struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	URL   string `json:"url"`
	Filters
	// Delivery is its delivery name (domain.SubscriptionDelivery): its consumer of the webhook
	// feed, its dead letters and its replays.
	Delivery string `json:"delivery"`
	// CommandID and CommandSeq name the create command; CreatedAt is when the stream stored
	// it: the subscription delivers the events and notices stored after it.
	CommandID  string    `json:"commandId"`
	CommandSeq uint64    `json:"commandSeq"`
	CreatedAt  time.Time `json:"createdAt"`
	CreatedBy  string    `json:"createdBy,omitempty"`
}

// Key is the record's located name.
func (r Record) Key() (string, error) {
	sc, err := ParseScope(r.Scope)
	if err != nil {
		return "", err
	}
	return domain.SubscriptionKey(domain.TenantOf(sc.Key), r.Name), nil
}

// EncodeRecord marshals a record as the bucket keeps it.
func EncodeRecord(r Record) ([]byte, error) { return encode("subscription record", r) }

// DecodeRecord reads a record from the bucket (fields it does not know are ignored).
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("decode subscription record: %w", err)
	}
	return r, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether name is a subscription name: 1-64 of [A-Za-z0-9_-].
func ValidName(name string) bool { return nameRE.MatchString(name) }

// ErrInvalid is wrapped by the checks of this package that return errors.
var ErrInvalid = errors.New("invalid subscription")

// CheckFilters checks the filters: known ce-types (the entities' and the campaigns'), states
// matched exactly, and the two categories.
func (f Filters) CheckFilters() error {
	for _, t := range f.Types {
		if known := slices.Concat(domain.CETypes, campaign.CETypes()); !slices.Contains(known, t) {
			return fmt.Errorf("type %q is not one of %s", truncate(t, 80), strings.Join(known, ", "))
		}
	}
	for _, st := range f.States {
		if !st.Valid() {
			return fmt.Errorf("state %q is not one of %v (matched exactly)", truncate(string(st), 80), domain.States)
		}
	}
	for _, c := range f.Categories {
		if c != domain.CategoryPlanned && c != domain.CategoryUnplanned {
			return fmt.Errorf("category %q is not %q or %q", truncate(c, 80), domain.CategoryPlanned, domain.CategoryUnplanned)
		}
	}
	return nil
}

// filterTarget names the filter field CheckFilters refused, for a rejection's target.
func (f Filters) filterTarget() string {
	switch {
	case slices.ContainsFunc(f.Types, func(t string) bool { return (Filters{Types: []string{t}}).CheckFilters() != nil }):
		return "types"
	case slices.ContainsFunc(f.States, func(s domain.State) bool { return !s.Valid() }):
		return "states"
	}
	return "categories"
}

// Standard Webhooks secrets: "whsec_" and the base64 of the key.
const (
	SecretPrefix = "whsec_"
	// SecretBytes is the size of the keys NewSecret makes (Standard Webhooks asks for 24 to 64).
	SecretBytes = 32
	// minSecretBytes is the shortest key accepted.
	minSecretBytes = 16
)

// NewSecret makes a signing secret: "whsec_" and the base64 of SecretBytes random bytes.
func NewSecret() (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a signing secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// DecodeSecret checks a signing secret and returns its key. Its errors never quote it.
func DecodeSecret(s string) ([]byte, error) {
	if !strings.HasPrefix(s, SecretPrefix) {
		return nil, errors.New(`secret must be "whsec_" followed by base64 (Standard Webhooks)`)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil || len(key) < minSecretBytes {
		return nil, fmt.Errorf(`secret must be "whsec_" followed by the base64 of at least %d bytes`, minSecretBytes)
	}
	return key, nil
}

func encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return b, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
