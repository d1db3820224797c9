package web

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"maintsignals/shared/domain"
)

// Customer tokens (--web-tokens FILE): each names a customer and the scopes (subscriptions, or
// resource groups in one) whose entities its holder sees. The file is a JSON array:
//
//	[{"name": "contoso", "token": "…", "scopes": ["/subscriptions/0b1f6471-…"]},
//	 {"name": "fabrikam", "token": "…", "scopes": ["/subscriptions/…/resourceGroups/prod"]}]
//
// It is read once, when the view starts; a file that does not read is an error naming the
// entry and the field at fault.

// ErrInvalidTokens is wrapped, with ErrInvalidConfig, by every error of the tokens file.
var ErrInvalidTokens = errors.New("invalid web tokens file")

// TokenEntry is one entry of the tokens file.
type TokenEntry struct {
	// Name says who holds the token: shown on the pages and in the logs, never the token.
	Name string `json:"name"`
	// Token is the bearer token: at least 16 of the characters of an RFC 6750 b64token.
	Token string `json:"token"`
	// Scopes are /subscriptions/<id> or /subscriptions/<id>/resourceGroups/<name>; the holder
	// sees the entities of any of them.
	Scopes []string `json:"scopes"`
}

// minToken is the shortest token taken, the operator's as the customers'.
const minToken = 16

// maxTokensFile bounds what is read of a tokens file.
const maxTokensFile = 4 << 20

var (
	tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// b64token is RFC 6750's token68: it travels as is in a header and in a cookie.
	b64tokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/-]+=*$`)
)

// Customer is the holder of a customer token: the entities of its scopes are all it sees.
// A nil *Customer is the operator (or an open view), who sees the whole fleet.
type Customer struct {
	Name   string
	Scopes []domain.Scope
	// keys are the scopes' keys, sorted, none under another: the union of the scopes as
	// disjoint prefixes of the key order.
	keys []string
}

func newCustomer(name string, scopes []domain.Scope) *Customer {
	c := &Customer{Name: name, Scopes: scopes}
	keys := make([]string, 0, len(scopes))
	for _, s := range scopes {
		keys = append(keys, s.Prefix.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	// Sorted, a prefix comes before the keys under it; only the outermost stay.
	for _, k := range keys {
		if n := len(c.keys); n == 0 || !domain.KeyUnder(k, c.keys[n-1]) {
			c.keys = append(c.keys, k)
		}
	}
	return c
}

// Covers reports whether the entity of key is the holder's to see (any entity for nil).
func (c *Customer) Covers(key string) bool {
	if c == nil {
		return true
	}
	for _, k := range c.keys {
		if domain.KeyUnder(key, k) {
			return true
		}
	}
	return false
}

// overlaps reports whether what lies under the key prefix and what the holder sees meet: a
// policy of a scope around or inside the holder's changes what its entities show.
func (c *Customer) overlaps(prefix string) bool {
	if c == nil {
		return true
	}
	for _, k := range c.keys {
		if domain.KeyUnder(prefix, k) || domain.KeyUnder(k, prefix) {
			return true
		}
	}
	return false
}

// within is the prefixes (keys) a table filtered by prefix shows to the holder: prefix itself
// for the operator, or inside one of the holder's scopes; else the holder's scopes under it
// (prefixes that end at a path segment are either nested or apart). nil shows nothing.
func (c *Customer) within(prefix string) []string {
	if c == nil {
		return []string{prefix}
	}
	var out []string
	for _, k := range c.keys {
		switch {
		case domain.KeyUnder(prefix, k):
			return []string{prefix}
		case domain.KeyUnder(k, prefix):
			out = append(out, k)
		}
	}
	return out
}

// scopeIDs are the holder's scopes as given, for the pages.
// name is the holder's name ("" the operator).
func (c *Customer) name() string {
	if c == nil {
		return ""
	}
	return c.Name
}

func (c *Customer) scopeIDs() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.Scopes))
	for i, s := range c.Scopes {
		out[i] = s.Prefix.ID
	}
	return out
}

// tokens are the tokens a view takes: the operator's (--web-token-file), who sees everything,
// and the customers'. Only their SHA-256 digests are kept, so that every comparison is of
// equal lengths.
type tokens struct {
	digests [][sha256.Size]byte
	holders []*Customer // by index in digests; nil the operator
}

func (t *tokens) add(token string, c *Customer) {
	t.digests = append(t.digests, sha256.Sum256([]byte(token)))
	t.holders = append(t.holders, c)
}

// any reports whether the view takes tokens at all.
func (t *tokens) any() bool { return len(t.digests) > 0 }

// customers counts the customer tokens.
func (t *tokens) customers() int {
	n := 0
	for _, h := range t.holders {
		if h != nil {
			n++
		}
	}
	return n
}

// lookup finds the holder of token. Every token is compared, in constant time, whatever
// matches: how long it takes says nothing of which token, if any, is near.
func (t *tokens) lookup(token string) (*Customer, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.digests {
		eq := subtle.ConstantTimeCompare(d[:], t.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 || token == "" {
		return nil, false
	}
	return t.holders[found], true
}

// readOperatorToken reads --web-token-file: one token, its surrounding white space ignored.
func readOperatorToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: TokenFile: %w", ErrInvalidConfig, err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minToken {
		return "", fmt.Errorf("%w: TokenFile: the token must be at least %d characters, %s holds %d", ErrInvalidConfig, minToken, path, len(token))
	}
	return token, nil
}

// LoadTokens reads and checks a tokens file.
func LoadTokens(path string) ([]TokenEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %w", ErrInvalidConfig, ErrInvalidTokens, err)
	}
	entries, rej := ParseTokens(b)
	if rej != nil {
		return nil, fmt.Errorf("%w: %w: %s: %w", ErrInvalidConfig, ErrInvalidTokens, path, rej)
	}
	return entries, nil
}

// ParseTokens reads and checks the entries of a tokens file. Each entry is read strictly (an
// unknown or repeated field, a value of another type is refused: a misspelt "scopes" must not
// leave a token without them); a rejection names the field by its path ("[1].scopes[0]").
func ParseTokens(b []byte) ([]TokenEntry, *domain.Rejection) {
	if len(b) > maxTokensFile {
		return nil, &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: fmt.Sprintf("the file is %d bytes, at most %d", len(b), maxTokensFile)}
	}
	var raw []json.RawMessage
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &raw) != nil {
		return nil, &domain.Rejection{Code: domain.CodeInvalidRequestContent,
			Message: `the file must be a JSON array of tokens: [{"name": "contoso", "token": "…", "scopes": ["/subscriptions/<id>"]}]`}
	}
	if len(raw) == 0 {
		return nil, &domain.Rejection{Code: domain.CodeInvalidRequestContent, Message: "the file lists no token"}
	}
	entries := make([]TokenEntry, len(raw))
	names, seen := map[string]int{}, map[[sha256.Size]byte]int{}
	for i, r := range raw {
		at := func(field string) string {
			if field == "" {
				return fmt.Sprintf("[%d]", i)
			}
			return fmt.Sprintf("[%d].%s", i, field)
		}
		e := &entries[i]
		if rej := domain.DecodeStrict(r, maxTokensFile, at(""), e); rej != nil {
			if rej.Target != "" && rej.Target != at("") {
				rej.Target = at(rej.Target)
			}
			return nil, rej
		}
		if rej := e.check(at); rej != nil {
			return nil, rej
		}
		if j, ok := names[e.Name]; ok {
			return nil, domain.InvalidParameter(at("name"), "%q is the name of entry %d too: each holder has its own", e.Name, j)
		}
		names[e.Name] = i
		d := sha256.Sum256([]byte(e.Token))
		if j, ok := seen[d]; ok {
			return nil, domain.InvalidParameter(at("token"), "is the token of entry %d (%s) too: a token names one holder", j, entries[j].Name)
		}
		seen[d] = i
	}
	return entries, nil
}

// check refuses an entry that would let its holder in without scopes, or with a token short
// or unfit for a header.
func (e *TokenEntry) check(at func(string) string) *domain.Rejection {
	switch {
	case !tokenNameRE.MatchString(e.Name):
		return domain.InvalidParameter(at("name"), "must be 1 to 64 of A-Z, a-z, 0-9, _ and -, got %q", domain.Truncate(e.Name, 80))
	case len(e.Token) < minToken:
		return domain.InvalidParameter(at("token"), "of %s must be at least %d characters, it has %d", e.Name, minToken, len(e.Token))
	case !b64tokenRE.MatchString(e.Token):
		return domain.InvalidParameter(at("token"), "of %s must be letters, digits and -._~+/ (then = padding), as a bearer token travels in a header: e.g. openssl rand -base64 32", e.Name)
	case len(e.Scopes) == 0:
		return domain.InvalidParameter(at("scopes"), "of %s lists no scope: a customer token sees the entities of its scopes only (/subscriptions/<id>, /subscriptions/<id>/resourceGroups/<name>)", e.Name)
	}
	for j, s := range e.Scopes {
		if _, err := domain.ParseScope(s); err != nil {
			return domain.InvalidParameter(at(fmt.Sprintf("scopes[%d]", j)), "%v", err)
		}
	}
	return nil
}

// customer is the holder of the entry's token.
func (e TokenEntry) customer() *Customer {
	scopes := make([]domain.Scope, len(e.Scopes))
	for i, s := range e.Scopes {
		scopes[i], _ = domain.ParseScope(s) // checked by ParseTokens
	}
	return newCustomer(e.Name, scopes)
}
