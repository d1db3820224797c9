package signing_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
)

func TestNewPolicy_RejectsBadSigners(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	acct, _ := nkeys.CreateAccount()
	apub, _ := acct.PublicKey()
	cases := map[string][]signing.Signer{
		"not a user key": {{Name: "a", PublicKey: apub, Roles: []signing.Role{signing.RoleAdmin}}},
		"no name":        {{PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}},
		"no role":        {{Name: "a", PublicKey: pub}},
		"unknown role":   {{Name: "a", PublicKey: pub, Roles: []signing.Role{"root"}}},
		"duplicate key":  {{Name: "a", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}, {Name: "b", PublicKey: pub, Roles: []signing.Role{signing.RoleUpdater}}},
		"no key":         {{Name: "a", Roles: []signing.Role{signing.RoleAdmin}}},
		"one key twice":  {{Name: "a", PublicKey: pub, PublicKeys: []string{pub}, Roles: []signing.Role{signing.RoleAdmin}}},
		"required, none": nil,
	}
	for name, signers := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := signing.NewPolicy(true, signers); !errors.Is(err, signing.ErrInvalidPolicy) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestRole_AllowsItsTasksOnly(t *testing.T) {
	for _, task := range domain.Tasks {
		outcome := task.Kind() == domain.KindOutcome
		if signing.RoleAdmin.Allows(task) == outcome {
			t.Errorf("admin allows %s: %t", task, !outcome)
		}
		if signing.RoleUpdater.Allows(task) != outcome {
			t.Errorf("updater allows %s: %t", task, outcome)
		}
		announce := task == domain.TaskPending || task == domain.TaskNone
		if signing.RoleCampaign.Allows(task) != announce {
			t.Errorf("campaign allows %s: %t", task, !announce)
		}
	}
}

func TestVerify_SignatureIsOverTheExactBody(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	p, err := signing.NewPolicy(false, []signing.Signer{{Name: "alice", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x"}`)
	h := nats.Header{}
	if err := signing.Sign(kp, body, h); err != nil {
		t.Fatal(err)
	}
	if s, rej := p.Verify(body, h); rej != nil || s.Name != "alice" {
		t.Fatalf("valid signature: %v %v", s, rej)
	}
	if _, rej := p.Verify([]byte(`{"id":"x" }`), h); rej == nil || rej.Code != domain.CodeUnauthorized {
		t.Fatalf("one byte more passed: %v", rej)
	}
	h.Set(signing.HeaderSignature, "!!!")
	if _, rej := p.Verify(body, h); rej == nil {
		t.Fatal("garbage signature passed")
	}
	if s, rej := p.Verify(body, nats.Header{}); rej != nil || s != nil {
		t.Fatalf("unsigned under a lax policy: %v %v", s, rej)
	}
}

func TestLoadPolicyAndSeed_FromFiles(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "signers.json"), []byte(`[{"name":"alice","publicKey":"`+pub+`","roles":["admin"]}]`), 0o600)
	os.WriteFile(filepath.Join(dir, "alice.nk"), seed, 0o600)
	p, err := signing.LoadPolicy(filepath.Join(dir, "signers.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := signing.LoadSeed(filepath.Join(dir, "alice.nk"))
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	signing.Sign(loaded, []byte("b"), h)
	if s, rej := p.Verify([]byte("b"), h); rej != nil || s.Name != "alice" {
		t.Fatalf("%v %v", s, rej)
	}
	if _, err := signing.LoadPolicy(filepath.Join(dir, "missing.json"), true); !errors.Is(err, signing.ErrInvalidPolicy) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestWatch_FollowsTheFileAndKeepsTheKeysInForceOnABadEdit: a valid change is in force at the
// next check; an edit that does not parse or validate (half a file, an unknown role) is
// refused and the keys in force stay; a missing file keeps them too.
func TestWatch_FollowsTheFileAndKeepsTheKeysInForceOnABadEdit(t *testing.T) {
	a, _ := nkeys.CreateUser()
	b, _ := nkeys.CreateUser()
	aPub, _ := a.PublicKey()
	bPub, _ := b.PublicKey()
	path := filepath.Join(t.TempDir(), "signers.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"name":"alice","publicKeys":["` + aPub + `"],"roles":["admin"]}]`)
	if _, err := signing.Watch(t.Context(), filepath.Join(t.TempDir(), "missing.json"), true, 0, nil); !errors.Is(err, signing.ErrInvalidPolicy) {
		t.Fatalf("missing file at start: %v, want ErrInvalidPolicy", err)
	}
	w, err := signing.Watch(t.Context(), path, true, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	signedBy := func(kp nkeys.KeyPair) *domain.Rejection {
		h := nats.Header{}
		if err := signing.Sign(kp, []byte("{}"), h); err != nil {
			t.Fatal(err)
		}
		_, rej := w.Verify([]byte("{}"), h)
		return rej
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
		}
	}
	if signedBy(a) != nil || signedBy(b) == nil {
		t.Fatal("at start: a must be accepted, b refused")
	}
	write(`[{"name":"alice","publicKeys":["` + aPub + `","` + bPub + `"],"roles":["admin"]}]`)
	waitUntil("b accepted after it was added", func() bool { return signedBy(b) == nil })
	for _, bad := range []string{`[{"name":"alice","publicKeys":["` + bPub, `[{"name":"alice","publicKeys":["` + bPub + `"],"roles":["root"]}]`} {
		write(bad)
		time.Sleep(100 * time.Millisecond) // several checks
		if signedBy(a) != nil || signedBy(b) != nil {
			t.Fatalf("a bad edit (%.40s…) changed the keys in force", bad)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if signedBy(a) != nil {
		t.Fatal("a missing file changed the keys in force")
	}
	write(`[{"name":"alice","publicKey":"` + bPub + `","roles":["admin"]}]`)
	waitUntil("a refused after it was removed", func() bool { return signedBy(a) != nil })
	if signedBy(b) != nil {
		t.Fatal("b refused after the rotation")
	}
}
