package fault

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bin is the maintctl binary built by TestMain (or named by $FAULT_MAINTCTL) for the
// scenarios that run functions as processes; "" under -short, where those scenarios skip.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	if prebuilt := os.Getenv("FAULT_MAINTCTL"); prebuilt != "" {
		// A binary built beforehand (to test a release build, or while the tree does not build).
		bin = prebuilt
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "maintctl-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "maintctl")
	goCmd := "go"
	if gr := os.Getenv("GOROOT"); gr != "" {
		if p := filepath.Join(gr, "bin", "go"); fileExists(p) {
			goCmd = p
		}
	}
	build := exec.Command(goCmd, "build", "-o", bin, "maintsignals/infra/maintctl")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "fault: go build maintctl:", err)
		return 1
	}
	return m.Run()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
