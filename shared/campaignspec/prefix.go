package campaignspec

import (
	"fmt"
	"slices"
	"strings"

	"maintsignals/shared/domain"
)

// Prefix is a resource-ID prefix that selects entities: domain.Prefix, the one definition
// that every selection by prefix shares.
type Prefix = domain.Prefix

// ParsePrefix reads a prefix (domain.ParsePrefix).
func ParsePrefix(s string) (Prefix, error) { return domain.ParsePrefix(s) }

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
