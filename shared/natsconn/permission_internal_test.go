package natsconn

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"$JS.API.>", "$JS.API.STREAM.DELETE.X", true},
		{"*.b", "a.b", true},
		{"a.b.c", "a.b", false},
	}
	for _, tt := range tests {
		if got := subjectMatches(tt.filter, tt.subject); got != tt.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
	}
}

func TestParseViolation_ReadsTheServersTexts(t *testing.T) {
	wrap := func(s string) error { return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, s) }
	tests := []struct {
		name string
		err  error
		want *PermissionError
	}{
		{"publish", wrap(`Permissions Violation for Publish to "maint.cmd.k"`), &PermissionError{Op: "publish", Subject: "maint.cmd.k"}},
		{"subscription", wrap(`Permissions Violation for Subscription to "_INBOX.x.*"`), &PermissionError{Op: "subscribe", Subject: "_INBOX.x.*"}},
		{"queue subscription", wrap(`Permissions Violation for Subscription to "a.b" using queue "q"`), &PermissionError{Op: "subscribe", Subject: "a.b"}},
		{"another error", errors.New("nats: slow consumer"), nil},
		{"a violation without a subject", wrap("something else"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseViolation(tt.err)
			if ok != (tt.want != nil) || (ok && *got != *tt.want) {
				t.Fatalf("parseViolation = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}
}
