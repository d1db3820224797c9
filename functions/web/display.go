package web

import "maintsignals/shared/domain"

// A resource ID is kept as first seen, for display, next to its key. Both are about as long,
// and most IDs are their key decoded but for the case of some letters
// ("/subscriptions/…/resourceGroups/…/Microsoft.RedHatOpenShift/…"): displayOf keeps only
// what the key does not say.
const (
	dispMask = 1 // followed by a bit mask of the upper-case letters of the decoded key
	dispFull = 2 // followed by the resource ID
)

// displayOf encodes id relative to key: "" when id is the key decoded, a bit mask of its
// upper-case letters when it differs from it only in ASCII case, else id itself.
func displayOf(key, id string) string {
	canon, err := domain.DecodeKey(key)
	if err != nil || id == "" || id == canon {
		return ""
	}
	if len(id) != len(canon) {
		return string(rune(dispFull)) + id
	}
	mask := make([]byte, 1+(len(id)+7)/8)
	mask[0] = dispMask
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c == canon[i]:
		case 'A' <= c && c <= 'Z' && c+('a'-'A') == canon[i]:
			mask[1+i/8] |= 1 << (i % 8)
		default:
			return string(rune(dispFull)) + id
		}
	}
	return string(mask)
}

// resourceID is the entity's resource ID as first seen.
func (e *entry) resourceID() string {
	canon, err := domain.DecodeKey(e.key)
	switch {
	case e.disp == "" && err == nil:
		return canon
	case e.disp == "":
		return e.key
	case e.disp[0] == dispFull:
		return e.disp[1:]
	}
	b := []byte(canon)
	for i := range b {
		if e.disp[1+i/8]&(1<<(i%8)) != 0 {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}
