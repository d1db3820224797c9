package e2e

import (
	"encoding/json"
	"maintsignals/test/testenv"
	"path/filepath"
	"testing"
)

// TestDLQOnACleanStack lists the dead letters of a fresh stack (none, exit 0) and refuses to
// replay one that does not exist.
func TestDLQOnACleanStack(t *testing.T) {
	up := startUp(t, testenv.FreePort(t), filepath.Join(t.TempDir(), "data"))

	mustContain(t, "dlq list", ok(t, up.URL, "dlq", "list"), "no dead letter")
	out := ok(t, up.URL, "dlq", "list", "-o", "json")
	var letters []map[string]any
	if err := json.Unmarshal([]byte(out), &letters); err != nil || len(letters) != 0 {
		t.Errorf("dlq list -o json = %q (%v), want []", out, err)
	}

	r := maintctl(t, up.URL, "dlq", "replay", "42")
	if r.code != 1 {
		t.Errorf("dlq replay of a missing dead letter: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "dlq replay 42 (stderr)", r.stderr, "error:", "dead letter not found", "42", "maintctl dlq list")
	up.stop()
}
