package telemetry_test

import (
	"regexp"
	"strconv"
	"testing"

	"maintsignals/shared/telemetry"
)

// The process's own goroutines and memory are on the page under the Go runtime semantic
// conventions, with plausible values.
func TestSetup_ExportsTheGoRuntime(t *testing.T) {
	cleanEnv(t)
	tel := setup(t, telemetry.Config{PrometheusListen: "127.0.0.1:0"})
	page := scrape(t, tel.PrometheusAddr())
	for _, series := range []string{
		`go_goroutine_count(_[a-z]+)?\{[^}]*\} ([0-9.e+]+)`,
		`go_memory_gc_goal_bytes\{[^}]*\} ([0-9.e+]+)`,
		`go_memory_used_bytes\{[^}]*go_memory_type="stack"[^}]*\} ([0-9.e+]+)`,
		`go_memory_used_bytes\{[^}]*go_memory_type="other"[^}]*\} ([0-9.e+]+)`,
	} {
		m := regexp.MustCompile(series).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("page lacks %s:\n%s", series, page)
			continue
		}
		if v, err := strconv.ParseFloat(m[len(m)-1], 64); err != nil || v <= 0 {
			t.Errorf("%s = %q, want a positive number", series, m[len(m)-1])
		}
	}
}
