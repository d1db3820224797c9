package signing_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
