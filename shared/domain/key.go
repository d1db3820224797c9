package domain

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on resource IDs. A key can be up to three times the ID's length (every byte
// escaped), which stays well inside what a NATS subject and a KV key accept.
const (
	MaxResourceIDBytes = 512
)

// ErrInvalidResourceID is wrapped by every resource-ID validation failure.
var ErrInvalidResourceID = errors.New("invalid resource ID")

const hexDigits = "0123456789abcdef"

func keepByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '/' || c == '-'
}

// ValidateResourceID checks what a resource ID must be before it can name an entity:
// not empty, valid UTF-8, no control characters, at most MaxResourceIDBytes.
func ValidateResourceID(id string) error {
	switch {
	case strings.TrimPrefix(id, "/") == "":
		return fmt.Errorf("%w: empty", ErrInvalidResourceID)
	case len(id) > MaxResourceIDBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidResourceID, len(id), MaxResourceIDBytes)
	case isPrintableASCII(id):
		return nil // the common case, checked in one pass
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidResourceID)
	case hasControl(id, false):
		return fmt.Errorf("%w: contains control characters", ErrInvalidResourceID)
	}
	return nil
}

// isPrintableASCII reports whether s holds only the bytes 0x20 to 0x7e.
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Key encodes a resource ID as an entity key (README, Messaging contract): lower-cased, leading "/" dropped,
// [a-z0-9_/-] kept and every other byte of its UTF-8 written as "=" and two lower-case hex
// digits. The key is one NATS subject token and a valid KV key. IDs that differ only in case
// (or in a leading "/") have the same key: they are the same entity.
func Key(resourceID string) (string, error) {
	if err := ValidateResourceID(resourceID); err != nil {
		return "", err
	}
	s := strings.TrimPrefix(resourceID, "/")
	if !isASCII(s) {
		s = strings.ToLower(s) // ASCII is lowered byte by byte below, without a copy
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if keepByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0x0f])
	}
	return b.String(), nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// MustKey is Key for IDs known to be valid (tests, constants); it panics otherwise.
func MustKey(resourceID string) string {
	k, err := Key(resourceID)
	if err != nil {
		panic(err)
	}
	return k
}

// DecodeKey turns a key back into the lower-cased resource ID with its leading "/".
func DecodeKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidResourceID)
	}
	out := make([]byte, 0, len(key)+1)
	out = append(out, '/')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if keepByte(c) {
			out = append(out, c)
			continue
		}
		if c != '=' || i+2 >= len(key) {
			return "", fmt.Errorf("%w: key %q: unexpected byte %q at %d", ErrInvalidResourceID, key, c, i)
		}
		hi, lo := unhex(key[i+1]), unhex(key[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("%w: key %q: bad escape at %d", ErrInvalidResourceID, key, i)
		}
		out = append(out, byte(hi<<4|lo))
		i += 2
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// hasControl reports C0/C1 control characters and DEL; allowNewlines lets \n, \r and \t through
// (for free text such as a reason or an error).
func hasControl(s string, allowNewlines bool) bool {
	for _, r := range s {
		if allowNewlines && (r == '\n' || r == '\r' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
