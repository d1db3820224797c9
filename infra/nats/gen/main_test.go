package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"

	natsconf "maintsignals/infra/nats"
)

func TestRun_WritesTheFilesAndOneSeedPerPartyButNeverReplacesASeed(t *testing.T) {
	dir, keys := t.TempDir(), filepath.Join(t.TempDir(), "keys")
	if err := run(dir, keys); err != nil {
		t.Fatal(err)
	}
	for name := range natsconf.Files() {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, u := range natsconf.DefaultUsers() {
		p := filepath.Join(keys, u.Name+".nk")
		seed, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nkeys.FromSeed(seed[:len(seed)-1]); err != nil {
			t.Errorf("%s: not a seed: %v", p, err)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", p, fi.Mode())
		}
	}
	if err := run(dir, keys); err == nil {
		t.Fatal("a second run replaced the seeds")
	}
}
