package policy

import (
	"strings"

	"maintsignals/shared/domain"
)

// Level is how much of the fleet a scope covers.
type Level int

// Scope levels, from the most specific.
const (
	LevelResource Level = iota + 1
	LevelResourceGroup
	LevelSubscription
)

func (l Level) String() string {
	switch l {
	case LevelResource:
		return "resource"
	case LevelResourceGroup:
		return "resource group"
	case LevelSubscription:
		return "subscription"
	}
	return "unknown"
}

// Scope is what a policy applies to: a subscription, a resource group or one resource.
type Scope struct {
	ID    string // as written, with its casing
	Key   string // the entity key of ID (domain.Key): the policy's KV key and subject token
	Level Level
}

// Covers reports whether the entity of key lies in the scope (the scope itself included): a
// scope is a resource-ID prefix (domain.KeyUnder). Keys are lower-cased, so this compares
// resource IDs case-insensitively.
func (s Scope) Covers(key string) bool { return domain.KeyUnder(key, s.Key) }

// ParseScope checks that s is exactly one of /subscriptions/<sub>,
// /subscriptions/<sub>/resourceGroups/<rg> or a whole resource ID (anything longer), and
// returns it with its key. A rejection names the target "scope".
func ParseScope(s string) (Scope, *domain.Rejection) {
	if err := domain.ValidateResourceID(s); err != nil {
		return Scope{}, domain.InvalidParameter("scope", "%v", err)
	}
	if !strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return Scope{}, domain.InvalidParameter("scope", "must be a resource-ID prefix that starts with / and ends at a path segment, without an empty segment")
	}
	segs := strings.Split(s[1:], "/")
	level := levelOf(segs)
	if level == 0 {
		return Scope{}, domain.InvalidParameter("scope", "must be /subscriptions/<sub>, /subscriptions/<sub>/resourceGroups/<rg> or a whole resource ID")
	}
	return Scope{ID: s, Key: domain.MustKey(s), Level: level}, nil
}

// levelOf is the level of a scope's segments (of its ID or of its key, which keeps the "/"),
// 0 for a prefix that is none: /subscriptions, /subscriptions/<sub>/resourceGroups.
func levelOf(segs []string) Level {
	for _, seg := range segs {
		if seg == "" {
			return 0
		}
	}
	if !strings.EqualFold(segs[0], "subscriptions") {
		return LevelResource
	}
	rg := len(segs) >= 3 && strings.EqualFold(segs[2], "resourceGroups")
	switch {
	case len(segs) == 1, len(segs) == 3 && rg:
		return 0
	case len(segs) == 2:
		return LevelSubscription
	case len(segs) == 4 && rg:
		return LevelResourceGroup
	}
	return LevelResource
}

// CandidateKeys lists the keys of the scopes that could cover the entity of key, from the most
// specific to the least: its own, its resource group's, its subscription's (at most three, fewer
// when the ID is itself a resource group or a subscription, or lies outside any). A store looks
// them up in this order; the first policy found applies, alone.
func CandidateKeys(key string) []string {
	segs := strings.Split(key, "/")
	out := make([]string, 0, 3)
	if levelOf(segs) != 0 {
		out = append(out, key)
	}
	if len(segs) > 4 && segs[0] == "subscriptions" && segs[2] == "resourcegroups" && levelOf(segs[:4]) != 0 {
		out = append(out, strings.Join(segs[:4], "/"))
	}
	if len(segs) > 2 && segs[0] == "subscriptions" && segs[1] != "" {
		out = append(out, segs[0]+"/"+segs[1])
	}
	return out
}

// CandidateKeysOf is CandidateKeys for a resource ID.
func CandidateKeysOf(resourceID string) ([]string, error) {
	key, err := domain.Key(resourceID)
	if err != nil {
		return nil, err
	}
	return CandidateKeys(key), nil
}
