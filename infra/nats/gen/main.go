// Command gen writes the NATS configuration files of infra/nats from the Go data of package
// maintsignals/infra/nats, and can create the nkeys of the parties.
//
//	go run ./infra/nats/gen                  # rewrite infra/nats/*.conf
//	go run ./infra/nats/gen -keys DIR        # also: one seed file per party in DIR (mode 0600),
//	                                         # and the MAINT_*_NKEY lines for the server's environment
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nats-io/nkeys"

	natsconf "maintsignals/infra/nats"
)

func main() {
	dir := flag.String("dir", "infra/nats", "where the .conf files go")
	keys := flag.String("keys", "", "when set, create a seed file per party in this directory (never overwritten) and print the public keys")
	flag.Parse()
	if err := run(*dir, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir, keysDir string) error {
	files := natsconf.Files()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := natsconf.Render(files[n])
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", p)
	}
	if keysDir == "" {
		return nil
	}
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		return err
	}
	for _, u := range natsconf.DefaultUsers() {
		if err := writeKey(keysDir, u); err != nil {
			return err
		}
	}
	return nil
}

// writeKey creates the seed of u in dir (refusing to replace one: that would lock the party
// out) and prints the environment line of its public key.
func writeKey(dir string, u natsconf.User) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	seed, err := kp.Seed()
	if err != nil {
		return err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return err
	}
	p := filepath.Join(dir, u.Name+".nk")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("seed of %s: %w", u.Name, err)
	}
	if _, err := f.Write(append(seed, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("%s=%s  # %s, seed in %s\n", strings.TrimPrefix(u.Nkey, "$"), pub, u.Role, p)
	return nil
}
