package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFindPrometheus3_RefusesWhatIsNotPrometheus3(t *testing.T) {
	dir := t.TempDir()
	debian := filepath.Join(dir, "prometheus")
	if err := os.WriteFile(debian, []byte("#!/bin/sh\necho 'prometheus, version 2.42.0+ds (branch: debian/sid)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	release3 := filepath.Join(dir, "prometheus3")
	if err := os.WriteFile(release3, []byte("#!/bin/sh\necho 'prometheus, version 3.5.0 (branch: HEAD)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go") // a Go binary, but not Prometheus
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, path, want string
	}{
		{"Debian's 2.x named by the variable", debian, "", "not Prometheus 3: prometheus, version 2.42.0"},
		{"another Go binary named by the variable", goBin, "", "--version"},
		{"a missing file named by the variable", filepath.Join(dir, "none"), "", "no such file"},
		{"Debian's 2.x on PATH and nothing else", "", dir, "no Prometheus 3.x binary found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPrometheus, tc.env)
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			t.Setenv("PATH", tc.path)
			_, err := FindPrometheus3()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if tc.env == "" && !errors.Is(err, errNoPrometheus3) {
				t.Fatalf("%v: without the variable, a missing Prometheus 3 is a skip (errNoPrometheus3)", err)
			}
		})
	}
	t.Run("a 3.x release build named by the variable", func(t *testing.T) {
		t.Setenv(EnvPrometheus, release3)
		if got, err := FindPrometheus3(); err != nil || got != release3 {
			t.Fatalf("got %q, %v", got, err)
		}
	})
}

// TestPrometheusVersionIsTheOneCIBuilds: .ci/run and the Taskfile build the version the tests
// look for in the cache.
func TestPrometheusVersionIsTheOneCIBuilds(t *testing.T) {
	for _, f := range []string{"../../.ci/run", "../../Taskfile.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// PROMETHEUS_VERSION=v… in the script, PROMETHEUS_VERSION: v… in the Taskfile.
		if !regexp.MustCompile(`PROMETHEUS_VERSION[=:] ?` + regexp.QuoteMeta(PrometheusVersion) + `\b`).Match(b) {
			t.Errorf("%s does not build Prometheus %s", f, PrometheusVersion)
		}
	}
}
