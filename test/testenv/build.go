package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildMaintctl builds the maintctl binary into a new temporary directory, for tests that run
// it as a user would (from a TestMain). remove deletes the directory.
func BuildMaintctl() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "maintctl-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "maintctl")
	goCmd := "go"
	// The go command of the toolchain running the tests, when it can be found.
	if gr := os.Getenv("GOROOT"); gr != "" {
		if p := filepath.Join(gr, "bin", "go"); fileExists(p) {
			goCmd = p
		}
	}
	build := exec.Command(goCmd, "build", "-o", bin, "maintsignals/infra/maintctl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go build maintctl: %w", err)
	}
	return bin, remove, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
