package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

func TestUp_RequireSignaturesRefusesUnsignedAndTrustsTheSigner(t *testing.T) {
	dir := t.TempDir()
	admin, _ := nkeys.CreateUser()
	pub, _ := admin.PublicKey()
	seed, _ := admin.Seed()
	signers := filepath.Join(dir, "signers.json")
	seedFile := filepath.Join(dir, "alice.nk")
	if err := os.WriteFile(signers, []byte(`[{"name":"alice","publicKey":"`+pub+`","roles":["admin"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, nil)
	u := startUpInProcess(t, c, 20*time.Second, "up", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--metrics-listen", "", "--signers", signers, "--require-signatures")
	m := listenRE.FindStringSubmatch(u.out.String())
	if m == nil {
		t.Fatalf("no listen address:\n%s", u.out)
	}
	c.env["NATS_URL"] = m[1]
	const id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/signed"

	r := c.run("pending", id, "--actor", "mallory")
	if r.code() != 2 {
		t.Fatalf("unsigned command: exit %d, want 2\n%s%s", r.code(), r.stdout, r.stderr)
	}
	mustContain(t, "unsigned", r.stdout+r.stderr+r.err.Error(), "Unauthorized")

	out := c.ok("pending", id, "--actor", "mallory", "--sign-key", seedFile)
	mustContain(t, "signed", out, "applied", "Pending")
	hist := c.ok("history", "-o", "wide", id)
	mustContain(t, "history", hist, "Unauthorized", "alice")
	if u.stop().err != nil {
		t.Fatal("up did not stop cleanly")
	}
}

func TestUp_RequireSignaturesNeedsSigners(t *testing.T) {
	c := newCLI(t, nil)
	r := c.run("up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-listen", "", "--require-signatures")
	if r.err == nil || !strings.Contains(r.err.Error(), "--signers") {
		t.Fatalf("up with --require-signatures and no signers: %v", r.err)
	}
}
