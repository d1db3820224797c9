package domain

import (
	"strings"
	"unicode"
)

// Truncate shortens s to n bytes and an ellipsis: what a sender wrote, quoted in a rejection
// or a reason without letting it grow without bound.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// HasControl reports control characters in s; allowNewlines lets \n, \r and \t through.
func HasControl(s string, allowNewlines bool) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(allowNewlines && (r == '\n' || r == '\r' || r == '\t'))
	})
}
