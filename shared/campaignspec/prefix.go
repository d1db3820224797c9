package campaignspec

import (
	"fmt"
	"slices"
	"strings"

	"maintsignals/shared/domain"
)

// Prefix is a resource-ID prefix that selects entities: it covers an entity whose ID is the
// prefix or continues it with "/" (it ends at a path segment), compared case-insensitively.
type Prefix struct {
	ID  string // lower-cased, with its leading "/": the canonical form
	Key string // the entity key of ID
}

// ParsePrefix reads a prefix: a resource ID (or the start of one) that starts with "/", has no
// empty segment and does not end with "/".
func ParsePrefix(s string) (Prefix, error) {
	if err := domain.ValidateResourceID(s); err != nil {
		return Prefix{}, err
	}
	if !strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return Prefix{}, fmt.Errorf("%w: a prefix starts with / and ends at a path segment, without an empty segment: %q", domain.ErrInvalidResourceID, domain.Truncate(s, 64))
	}
	key := domain.MustKey(s)
	id, err := domain.DecodeKey(key)
	if err != nil {
		return Prefix{}, err
	}
	return Prefix{ID: id, Key: key}, nil
}

// Covers reports whether the entity of key lies under the prefix.
func (p Prefix) Covers(key string) bool {
	return strings.HasPrefix(key, p.Key) && (len(key) == len(p.Key) || key[len(p.Key)] == '/')
}

// compilePrefixes reads a list of prefixes, sorted by key and without repeats (their order
// does not matter: they select a union).
func compilePrefixes(in []string, target string) ([]Prefix, *domain.Rejection) {
	if len(in) > MaxPrefixes {
		return nil, domain.InvalidParameter(target, "has %d prefixes, at most %d", len(in), MaxPrefixes)
	}
	out := make([]Prefix, 0, len(in))
	for i, s := range in {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, domain.InvalidParameter(fmt.Sprintf("%s[%d]", target, i), "%v", err)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Prefix) int { return strings.Compare(a.Key, b.Key) })
	return slices.CompactFunc(out, func(a, b Prefix) bool { return a.Key == b.Key }), nil
}

func prefixIDs(ps []Prefix) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// coveredBy reports whether one of the prefixes (sorted by key) covers key.
func coveredBy(ps []Prefix, key string) bool {
	for _, p := range ps {
		if p.Covers(key) {
			return true
		}
	}
	return false
}
