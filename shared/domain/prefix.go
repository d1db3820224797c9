package domain

import (
	"fmt"
	"strings"
)

// Prefix is a resource-ID prefix that selects entities (README, One definition of every fleet
// fact): it covers an entity whose ID is the prefix or continues it with "/" — it ends at a
// path segment, so …/resourceGroups/rg-1 never selects …/rg-10 — compared case-insensitively.
// Every selection by prefix (list --prefix, the web view's filter, campaign and wave prefixes,
// policy scopes, webhook subscriptions) uses it.
type Prefix struct {
	ID  string // lower-cased, with its leading "/": the canonical form
	Key string // the entity key of ID
}

// ParsePrefix reads a prefix: a resource ID (or the start of one) that starts with "/", has no
// empty segment and does not end with "/".
func ParsePrefix(s string) (Prefix, error) {
	if err := ValidateResourceID(s); err != nil {
		return Prefix{}, err
	}
	if !strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return Prefix{}, fmt.Errorf("%w: a prefix starts with / and ends at a path segment, without an empty segment: %q", ErrInvalidResourceID, truncate(s, 64))
	}
	key := MustKey(s)
	id, err := DecodeKey(key)
	if err != nil {
		return Prefix{}, err
	}
	return Prefix{ID: id, Key: key}, nil
}

// ParsePrefixLoose is ParsePrefix for a prefix typed by a person (a flag, a query parameter, a
// subscription's filter): a missing leading "/" is added and one trailing "/" dropped, since
// "…/rg-1/" has always meant the resource group rg-1.
func ParsePrefixLoose(s string) (Prefix, error) {
	if s != "" && !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	if len(s) > 1 {
		s = strings.TrimSuffix(s, "/")
	}
	return ParsePrefix(s)
}

// Covers reports whether the entity of key lies under the prefix. The zero Prefix covers
// every entity.
func (p Prefix) Covers(key string) bool { return KeyUnder(key, p.Key) }

// CoversID is Covers for a resource ID; false for an ID that is not one.
func (p Prefix) CoversID(resourceID string) bool {
	if p.Key == "" {
		return true
	}
	key, err := Key(resourceID)
	return err == nil && p.Covers(key)
}

// KeyUnder reports whether the entity key key lies under the key prefix: equal to it, or
// continuing it with "/"; the empty prefix covers every key. It is the rule of Prefix, for
// callers that hold keys only (policy scopes, the web view's key ranges).
func KeyUnder(key, prefix string) bool {
	return prefix == "" || strings.HasPrefix(key, prefix) && (len(key) == len(prefix) || key[len(prefix)] == '/')
}
