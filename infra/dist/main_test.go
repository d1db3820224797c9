package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Two builds of the same checkout into different places give the same bytes, and SHA256SUMS
// names each binary with its checksum.
func TestBuild_IsReproducibleAndListsItsChecksums(t *testing.T) {
	if testing.Short() {
		t.Skip("builds maintctl twice")
	}
	// The image's platform: its build is shared with the image test's (the same flags), so the
	// suite compiles maintctl once; the other targets differ only by GOOS/GOARCH.
	host := []Target{{"linux", runtime.GOARCH}}
	module := filepath.Join("..", "..")
	ctx := context.Background()
	first, err := build(ctx, module, filepath.Join(t.TempDir(), "a"), host)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	second, err := build(ctx, module, dir, host)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatalf("two builds differ:\n%s\n%s", first, second)
	}
	lines := strings.Split(strings.TrimSpace(second), "\n")
	if len(lines) != len(host) {
		t.Fatalf("%s lists %d binaries, want %d:\n%s", SumsFile, len(lines), len(host), second)
	}
	for _, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("line %q is not sha256sum's format", l)
		}
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil || got != sum {
			t.Errorf("%s: checksum %s, listed %s (%v)", name, got, sum, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, SumsFile)); string(b) != second {
		t.Errorf("%s on disk differs from what build returned", SumsFile)
	}
}

func TestParseTargets(t *testing.T) {
	if ts, err := parseTargets(""); err != nil || len(ts) != 4 {
		t.Errorf(`parseTargets("") = %v, %v; want the four defaults`, ts, err)
	}
	if ts, err := parseTargets("linux/arm64, darwin/amd64"); err != nil || len(ts) != 2 || ts[1] != (Target{"darwin", "amd64"}) {
		t.Errorf("parseTargets = %v, %v", ts, err)
	}
	for _, bad := range []string{"linux", "/amd64", "linux/"} {
		if _, err := parseTargets(bad); err == nil {
			t.Errorf("parseTargets(%q) accepted", bad)
		}
	}
}
