package fault

import (
	"flag"
	"fmt"
	"maintsignals/test/testenv"
	"os"
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
	b, remove, err := testenv.BuildMaintctl()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		return 1
	}
	defer remove()
	bin = b
	return m.Run()
}
