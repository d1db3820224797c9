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
	"maintsignals/shared/policy"
	"maintsignals/shared/signing"
)

func TestNewPolicy_RejectsBadSigners(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	acct, _ := nkeys.CreateAccount()
	apub, _ := acct.PublicKey()
	cases := map[string][]signing.Signer{
		"not a user key":              {{Name: "a", PublicKey: apub, Roles: []signing.Role{signing.RoleAdmin}}},
		"no name":                     {{PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}},
		"no role":                     {{Name: "a", PublicKey: pub}},
		"unknown role":                {{Name: "a", PublicKey: pub, Roles: []signing.Role{"root"}}},
		"duplicate key":               {{Name: "a", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}, {Name: "b", PublicKey: pub, Roles: []signing.Role{signing.RoleUpdater}}},
		"no key":                      {{Name: "a", Roles: []signing.Role{signing.RoleAdmin}}},
		"one key twice":               {{Name: "a", PublicKey: pub, PublicKeys: []string{pub}, Roles: []signing.Role{signing.RoleAdmin}}},
		"required, none":              nil,
		"customer without scopes":     {{Name: "c", PublicKey: pub, Roles: []signing.Role{signing.RoleCustomer}}},
		"customer with a bad scope":   {{Name: "c", PublicKey: pub, Roles: []signing.Role{signing.RoleCustomer}, Scopes: []string{"/subscriptions/s/resourceGroups"}}},
		"scopes without the customer": {{Name: "a", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}, Scopes: []string{"/subscriptions/s"}}},
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

// TestAuthorize_CustomerWithinItsScopesOnly: a customer may send Reschedule for the entities of
// its scopes and set or delete the policies within them, nothing else; an admin may do both
// anywhere; an updater neither.
func TestAuthorize_CustomerWithinItsScopesOnly(t *testing.T) {
	kps := make([]nkeys.KeyPair, 3)
	keys := make([]string, 3)
	for i := range keys {
		kps[i], _ = nkeys.CreateUser()
		keys[i], _ = kps[i].PublicKey()
	}
	p, err := signing.NewPolicy(true, []signing.Signer{
		{Name: "contoso", PublicKey: keys[0], Roles: []signing.Role{signing.RoleCustomer}, Scopes: []string{"/subscriptions/S1/resourceGroups/rg-a", "/subscriptions/s2"}},
		{Name: "alice", PublicKey: keys[1], Roles: []signing.Role{signing.RoleAdmin}},
		{Name: "robot", PublicKey: keys[2], Roles: []signing.Role{signing.RoleUpdater}},
	})
	if err != nil {
		t.Fatal(err)
	}
	signer := func(i int) *signing.Signer {
		body, h := []byte("x"), nats.Header{}
		if err := signing.Sign(kps[i], body, h); err != nil {
			t.Fatal(err)
		}
		s, rej := p.Verify(body, h)
		if rej != nil {
			t.Fatal(rej)
		}
		return s
	}
	const inside = "/subscriptions/s1/resourcegroups/RG-A/providers/p/clusters/c1"
	const outside = "/subscriptions/s1/resourceGroups/rg-b/providers/p/clusters/c1"
	const sub2 = "/subscriptions/S2/resourceGroups/any/providers/p/clusters/c9"
	customer, admin, updater := signer(0), signer(1), signer(2)
	for _, tc := range []struct {
		name   string
		s      *signing.Signer
		c      domain.Command
		allows bool
	}{
		{"customer reschedules an entity of its resource group", customer, domain.Command{ResourceID: inside, Task: domain.TaskReschedule}, true},
		{"customer reschedules an entity of its subscription", customer, domain.Command{ResourceID: sub2, Task: domain.TaskReschedule}, true},
		{"customer may not reschedule outside its scopes", customer, domain.Command{ResourceID: outside, Task: domain.TaskReschedule}, false},
		{"customer may not announce", customer, domain.Command{ResourceID: inside, Task: domain.TaskPending}, false},
		{"customer may not start an update", customer, domain.Command{ResourceID: inside, Task: domain.TaskEverything}, false},
		{"customer may not clear", customer, domain.Command{ResourceID: inside, Task: domain.TaskNone}, false},
		{"customer may not report an outcome", customer, domain.Command{ResourceID: inside, Task: domain.TaskUpdateSucceeded}, false},
		{"admin reschedules anything", admin, domain.Command{ResourceID: outside, Task: domain.TaskReschedule}, true},
		{"updater may not reschedule", updater, domain.Command{ResourceID: inside, Task: domain.TaskReschedule}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := p.Authorize(tc.s, tc.c)
			if (rej == nil) != tc.allows || rej != nil && rej.Code != domain.CodeUnauthorized {
				t.Errorf("Authorize = %v, want allowed %t", rej, tc.allows)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		s      *signing.Signer
		scope  string
		allows bool
	}{
		{"customer sets its resource group's policy", customer, "/subscriptions/s1/resourceGroups/rg-a", true},
		{"customer sets a policy of one resource of it", customer, inside, true},
		{"customer sets its subscription's policy", customer, "/subscriptions/s2", true},
		{"customer may not set the subscription's above its resource group", customer, "/subscriptions/s1", false},
		{"customer may not set another resource group's", customer, "/subscriptions/s1/resourceGroups/rg-b", false},
		{"admin sets any", admin, "/subscriptions/s1", true},
		{"updater may not", updater, "/subscriptions/s1/resourceGroups/rg-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope, rej := policy.ParseScope(tc.scope)
			if rej != nil {
				t.Fatal(rej)
			}
			rej = p.AuthorizePolicy(tc.s, scope)
			if (rej == nil) != tc.allows || rej != nil && rej.Code != domain.CodeUnauthorized {
				t.Errorf("AuthorizePolicy = %v, want allowed %t", rej, tc.allows)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		s      *signing.Signer
		scope  string
		allows bool
	}{
		{"customer subscribes to its resource group", customer, "/subscriptions/s1/resourceGroups/rg-a", true},
		{"customer subscribes to one resource of it", customer, inside, true},
		{"customer subscribes to its subscription", customer, "/subscriptions/s2", true},
		{"customer may not subscribe to the subscription above its resource group", customer, "/subscriptions/s1", false},
		{"customer may not subscribe to another resource group", customer, "/subscriptions/s1/resourceGroups/rg-b", false},
		{"admin subscribes to any", admin, "/subscriptions/s1", true},
		{"updater may not", updater, "/subscriptions/s1/resourceGroups/rg-a", false},
	} {
		t.Run("subscription: "+tc.name, func(t *testing.T) {
			scope, rej := policy.ParseScope(tc.scope)
			if rej != nil {
				t.Fatal(rej)
			}
			rej = p.AuthorizeSubscription(tc.s, scope)
			if (rej == nil) != tc.allows || rej != nil && rej.Code != domain.CodeUnauthorized {
				t.Errorf("AuthorizeSubscription = %v, want allowed %t", rej, tc.allows)
			}
		})
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
