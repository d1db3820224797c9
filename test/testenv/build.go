package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NatsServerVersion is the nats-server version pinned in go.mod, the one every test runs.
const NatsServerVersion = "2.15.2"

// BuildMaintctl builds the maintctl binary into a new temporary directory, for tests that run
// it as a user would (from a TestMain). remove deletes the directory.
func BuildMaintctl() (bin string, remove func(), err error) {
	return goBuild("maintctl", "maintsignals/infra/maintctl")
}

// BuildNatsServer builds the nats-server of go.mod (from the module cache, so offline) into a
// new temporary directory, for tests that run each node as a process of its own, and checks
// that it is the pinned version. remove deletes the directory.
func BuildNatsServer() (bin string, remove func(), err error) {
	bin, remove, err = goBuild("nats-server", "github.com/nats-io/nats-server/v2")
	if err != nil {
		return "", nil, err
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v"+NatsServerVersion) {
		remove()
		return "", nil, fmt.Errorf("nats-server --version: %q (%v), want v%s", bytes.TrimSpace(out), err, NatsServerVersion)
	}
	return bin, remove, nil
}

// goBuild builds pkg into a new temporary directory as name.
func goBuild(name, pkg string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, name)
	goCmd := "go"
	// The go command of the toolchain running the tests, when it can be found.
	if gr := os.Getenv("GOROOT"); gr != "" {
		if p := filepath.Join(gr, "bin", "go"); fileExists(p) {
			goCmd = p
		}
	}
	build := exec.Command(goCmd, "build", "-o", bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go build %s: %w", name, err)
	}
	return bin, remove, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
