// Command dist builds the release binaries of maintctl (task dist): one static binary for each
// of linux and darwin on amd64 and arm64, and SHA256SUMS, reproducibly (the same checkout gives
// the same bytes on any machine: no paths, no build id, no cgo).
//
//	go run ./infra/dist -out bin/dist
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"maintsignals/infra/image/imagebuild"
)

// Target is one platform of the release.
type Target struct{ OS, Arch string }

// Targets are the platforms released by default.
var Targets = []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// SumsFile lists the SHA-256 of every binary, in the format of sha256sum (check with
// `sha256sum -c SHA256SUMS`).
const SumsFile = "SHA256SUMS"

func main() {
	out := flag.String("out", "bin/dist", "output directory")
	module := flag.String("module", ".", "root of the Go module (where go.mod is)")
	only := flag.String("targets", "", "comma-separated os/arch to build (default: all four)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	targets, err := parseTargets(*only)
	if err != nil {
		log.Error("bad -targets", "error", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sums, err := build(ctx, *module, *out, targets)
	if err != nil {
		log.Error("dist build failed", "error", err)
		os.Exit(1)
	}
	fmt.Print(sums)
}

// parseTargets reads os/arch pairs; "" is every default target.
func parseTargets(s string) ([]Target, error) {
	if s == "" {
		return Targets, nil
	}
	var ts []Target
	for _, p := range strings.Split(s, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || arch == "" {
			return nil, fmt.Errorf("%q is not os/arch", p)
		}
		ts = append(ts, Target{goos, arch})
	}
	return ts, nil
}

// build compiles maintctl for every target into out as maintctl-OS-ARCH and writes SumsFile
// there; it returns the file's content.
func build(ctx context.Context, moduleDir, out string, targets []Target) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	var sums strings.Builder
	for _, t := range targets {
		name := fmt.Sprintf("maintctl-%s-%s", t.OS, t.Arch)
		path := filepath.Join(out, name)
		if err := imagebuild.CompileMaintctl(ctx, moduleDir, t.OS, t.Arch, path); err != nil {
			return "", fmt.Errorf("%s/%s: %w", t.OS, t.Arch, err)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, name)
	}
	if err := os.WriteFile(filepath.Join(out, SumsFile), []byte(sums.String()), 0o644); err != nil {
		return "", err
	}
	return sums.String(), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
