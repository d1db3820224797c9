package campaign

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

// Entry is one entity of a selection: its key, and its resource ID as first seen.
type Entry struct {
	Key        string
	ResourceID string
}

// Selection is a campaign's entities, one entry per key, sorted by key: frozen at creation.
type Selection []Entry

// ErrInvalidList is wrapped by every ParseList failure.
var ErrInvalidList = errors.New("invalid list")

// ListError is a list line that is not a resource ID.
type ListError struct {
	Line int
	Err  error
}

func (e *ListError) Error() string {
	return fmt.Sprintf("%v: line %d: %v", ErrInvalidList, e.Line, e.Err)
}
func (e *ListError) Unwrap() []error { return []error{ErrInvalidList, e.Err} }

// MaxListLine bounds a line of a list, resource ID and blanks around it.
const MaxListLine = 4 * domain.MaxResourceIDBytes

// List is a list of resource IDs as the selection's list: its entries sorted by key, one per
// key, and the SHA-256 of its bytes.
type List struct {
	Entries Selection
	SHA256  string
}

// Count is how many distinct entities the list names (what selection.list.count says).
func (l *List) Count() int { return len(l.Entries) }

// Ref names the list stored as object.
func (l *List) Ref(object string) campaignspec.ListRef {
	return campaignspec.ListRef{Object: object, SHA256: l.SHA256, Count: l.Count()}
}

// Check reports whether the list is the one ref names (its SHA-256 and count).
func (l *List) Check(ref campaignspec.ListRef) error {
	if l.SHA256 != ref.SHA256 || l.Count() != ref.Count {
		return fmt.Errorf("%w: object %q has SHA-256 %s and %d entities, the spec says %s and %d",
			ErrInvalidList, ref.Object, l.SHA256, l.Count(), ref.SHA256, ref.Count)
	}
	return nil
}

// ParseList reads a list: one resource ID a line; blank lines, and lines whose first
// non-blank character is #, are ignored; spaces around an ID and a final \r are dropped. An
// error names the line. A list that names no ID, or more than MaxEntities, is refused.
func ParseList(r io.Reader) (*List, error) {
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(r, h))
	sc.Buffer(make([]byte, 0, 64<<10), MaxListLine)
	var out Selection
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(string(bytes.TrimPrefix(sc.Bytes(), bom(line))))
		if text == "" || text[0] == '#' {
			continue
		}
		key, err := domain.Key(text)
		if err != nil {
			return nil, &ListError{Line: line, Err: err}
		}
		out = append(out, Entry{Key: key, ResourceID: text})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ListError{Line: line + 1, Err: fmt.Errorf("longer than %d bytes", MaxListLine)}
		}
		return nil, fmt.Errorf("read list: %w", err)
	}
	sel := normalize(out)
	switch {
	case len(sel) == 0:
		return nil, fmt.Errorf("%w: it names no resource ID", ErrInvalidList)
	case len(sel) > campaignspec.MaxEntities:
		return nil, fmt.Errorf("%w: it names %d entities, at most %d", ErrInvalidList, len(sel), campaignspec.MaxEntities)
	}
	return &List{Entries: sel, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// bom is the UTF-8 byte-order mark a first line may start with.
func bom(line int) []byte {
	if line == 1 {
		return []byte("\ufeff")
	}
	return nil
}

// normalize sorts entries by key and keeps one of each key: of IDs that differ only in case,
// the one that sorts first (byte order), whatever order they came in.
func normalize(s Selection) Selection {
	slices.SortFunc(s, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.ResourceID, b.ResourceID))
	})
	return slices.CompactFunc(s, func(a, b Entry) bool { return a.Key == b.Key })
}

// merge is the union of two normalized selections, a's entry kept where both have a key.
func merge(a, b Selection) Selection {
	out := make(Selection, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch c := strings.Compare(a[0].Key, b[0].Key); {
		case c < 0:
			out, a = append(out, a[0]), a[1:]
		case c > 0:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// Select is a campaign's selection: the list's entities (list may be nil) and the tracked
// entities that one of prefixes covers, one entry per key, sorted by key. tracked yields each
// tracked entity's key and resource ID as first seen ("" for the key's decoded form); it is
// not read when there are no prefixes. An entity both listed and tracked keeps the list's
// casing; list must be normalized (as ParseList returns it).
func Select(list *List, prefixes []campaignspec.Prefix, tracked iter.Seq2[string, string]) (Selection, error) {
	var listed, found Selection
	if list != nil {
		listed = list.Entries
	}
	if len(prefixes) > 0 && tracked != nil {
		index := make(map[string]bool, len(prefixes))
		for _, p := range prefixes {
			index[p.Key] = true
		}
		for key, id := range tracked {
			if !underAny(index, key) {
				continue
			}
			if id == "" {
				var err error
				if id, err = domain.DecodeKey(key); err != nil {
					return nil, fmt.Errorf("tracked entity: %w", err)
				}
			}
			found = append(found, Entry{Key: key, ResourceID: id})
		}
	}
	out := merge(listed, normalize(found))
	if len(out) > campaignspec.MaxEntities {
		return nil, fmt.Errorf("the selection has %d entities, at most %d", len(out), campaignspec.MaxEntities)
	}
	return out, nil
}

// underAny reports whether key or one of its ancestors at a "/" is in index: a look-up per
// segment, however many prefixes there are.
func underAny(index map[string]bool, key string) bool {
	for i := 0; i <= len(key); i++ {
		if (i == len(key) || key[i] == '/') && index[key[:i]] {
			return true
		}
	}
	return false
}

// Subscription is the subscription of an entity, which spread.maxPerSlotPerSubscription
// counts by: the /subscriptions/<sub> prefix of its resource ID ("subscriptions" in any
// case), as written, or the whole ID when it has none.
func Subscription(resourceID string) string {
	rest := strings.TrimPrefix(resourceID, "/")
	head, tail, ok := strings.Cut(rest, "/")
	if !ok || !strings.EqualFold(head, "subscriptions") {
		return resourceID
	}
	sub, _, _ := strings.Cut(tail, "/")
	if sub == "" {
		return resourceID
	}
	return resourceID[:len(resourceID)-len(rest)+len(head)+1+len(sub)]
}

// SubscriptionKey is Subscription for an entity key: "subscriptions/<sub>", or the key.
func SubscriptionKey(key string) string {
	t := domain.TenantOf(key)
	if t.Subscription == domain.NoToken {
		return key
	}
	return "subscriptions/" + t.Subscription
}
