package partition

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"

	"maintsignals/test/testenv"
)

// Binaries built by TestMain when the suite runs: maintctl (the functions and provisioning)
// and the pinned nats-server.
var maintctlBin, natsBin string

// enabled reports whether the partition suite was asked for: it needs root, takes minutes
// and changes the machine's network (a private bridge), so plain `go test ./...` skips it.
func enabled() bool { return os.Getenv("MAINT_PARTITION") == "1" }

func TestMain(m *testing.M) {
	// A publisher is this test binary started again in a namespace with PublisherEnv set.
	if cfg := os.Getenv(PublisherEnv); cfg != "" {
		var c PublisherConfig
		if err := json.Unmarshal([]byte(cfg), &c); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			os.Exit(2)
		}
		if err := RunPublisher(c); err != nil {
			fmt.Fprintln(os.Stderr, "publisher:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	if !enabled() || testing.Short() {
		return m.Run()
	}
	b, remove, err := testenv.BuildMaintctl()
	if err != nil {
		fmt.Fprintln(os.Stderr, "partition:", err)
		return 1
	}
	defer remove()
	maintctlBin = b
	ns, removeNS, err := testenv.BuildNatsServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "partition:", err)
		return 1
	}
	defer removeNS()
	natsBin = ns
	return m.Run()
}

// needSuite skips unless the partition suite was asked for and its binaries are built.
func needSuite(t *testing.T) {
	t.Helper()
	if !enabled() {
		t.Skip("partition suite: set MAINT_PARTITION=1 to run it (needs root and iproute2; about 15 minutes)")
	}
	if testing.Short() || maintctlBin == "" || natsBin == "" {
		t.Skip("partition suite: not under -short")
	}
}
