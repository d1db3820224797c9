package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"maintsignals/functions/command"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

// signedMsg is a command signed by kp as maintctl signs it: issuedAt (now, unless set) inside
// the signed body. msgID "" publishes it without a Nats-Msg-Id header.
func signedMsg(t *testing.T, kp nkeys.KeyPair, cmd domain.Command, msgID string) *nats.Msg {
	t.Helper()
	if cmd.IssuedAt == "" {
		cmd.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(domain.CommandSubject(domain.MustKey(cmd.ResourceID)))
	m.Data = body
	if err := signing.Sign(kp, body, m.Header); err != nil {
		t.Fatal(err)
	}
	if msgID != "" {
		m.Header.Set(domain.HeaderMsgID, msgID)
	}
	return m
}

// replay publishes a copy of a captured message: same body, same signature, and the given
// Nats-Msg-Id ("" for none).
func replay(t *testing.T, env *testenv.Env, captured *nats.Msg, msgID string) {
	t.Helper()
	m := nats.NewMsg(captured.Subject)
	m.Data = captured.Data
	for _, h := range []string{signing.HeaderSigner, signing.HeaderSignature} {
		m.Header.Set(h, captured.Header.Get(h))
	}
	if msgID != "" {
		m.Header.Set(domain.HeaderMsgID, msgID)
	}
	if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func adminPolicy(t *testing.T) (nkeys.KeyPair, *signing.Policy) {
	t.Helper()
	admin, _ := nkeys.CreateUser()
	pub, _ := admin.PublicKey()
	p, err := signing.NewPolicy(true, []signing.Signer{{Name: "alice", PublicKey: pub, Roles: []signing.Role{signing.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	return admin, p
}

// TestHandle_CapturedSignedCommandNeverTakesEffectTwice: a correctly signed Pending is applied,
// then captured copies are published again: without Nats-Msg-Id, under another Nats-Msg-Id,
// after 33 newer commands of the entity (more than the ids a record remembers), and after the
// stream's duplicate window. None changes the record again; each gets a duplicate or a
// rejection, and the history shows it.
func TestHandle_CapturedSignedCommandNeverTakesEffectTwice(t *testing.T) {
	admin, policy := adminPolicy(t)
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.DuplicateWindow = time.Second }))
	startReplicas(t, env, 1, command.Config{Auth: policy})
	key := domain.MustKey(cluster)
	publish := func(m *nats.Msg) {
		t.Helper()
		if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}

	captured := signedMsg(t, admin, domain.Command{ID: "announce", ResourceID: cluster, Task: domain.TaskPending, Reason: "PUCM"}, "announce")
	publish(captured)
	publish(signedMsg(t, admin, domain.Command{ID: "clear-0", ResourceID: cluster, Task: domain.TaskNone}, "clear-0"))
	n := 2
	replay(t, env, captured, "")        // no header
	replay(t, env, captured, "other-1") // another header: differs from the body's id
	n += 2
	for i := range 33 { // push the id out of the record's memory
		task := []domain.Task{domain.TaskCustomerActionNeeded, domain.TaskNone}[i%2]
		id := fmt.Sprintf("newer-%d", i)
		publish(signedMsg(t, admin, domain.Command{ID: id, ResourceID: cluster, Task: task}, id))
		n++
	}
	replay(t, env, captured, "")
	n++
	events(t, env.JS, key, n)
	time.Sleep(1500 * time.Millisecond) // past the stream's duplicate window
	replay(t, env, captured, "announce")
	n++

	evs := events(t, env.JS, key, n)
	applied := 0
	for _, ev := range evs {
		if ev.CommandID != "announce" {
			continue
		}
		switch {
		case ev.Outcome == domain.OutcomeApplied:
			applied++
		case ev.Outcome == domain.OutcomeDuplicate, ev.Outcome == domain.OutcomeRejected:
		default:
			t.Errorf("replay outcome %+v", ev)
		}
	}
	var replays []string
	for _, ev := range evs[2:] {
		if ev.CommandID == "announce" || ev.CommandID == "other-1" {
			replays = append(replays, fmt.Sprintf("%s %s %s", ev.Outcome, ev.Code, ev.Message))
		}
	}
	t.Logf("the history of the replays:\n  %s", strings.Join(replays, "\n  "))
	if applied != 1 || len(replays) != 4 {
		t.Fatalf("announce applied %d times, %d replay outcomes; want 1 and 4", applied, len(replays))
	}
	rec, _ := record(t, env, key)
	if rec.State != domain.StateCustomerActionNeeded || rec.LastCommandID != "newer-32" || len(rec.SignedUpTo) != 1 {
		t.Fatalf("record %+v, want CustomerActionNeeded from newer-32 and one key remembered", rec)
	}
}

// TestHandle_SignedCommandOutsideItsAgeIsExpired: a signed command issued longer ago than
// --max-command-age, or more than a minute ahead, is refused Unauthorized "expired".
func TestHandle_SignedCommandOutsideItsAgeIsExpired(t *testing.T) {
	admin, policy := adminPolicy(t)
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{Auth: policy, MaxCommandAge: 10 * time.Minute})
	key := domain.MustKey(cluster)
	now := time.Now().UTC()
	for i, issued := range []time.Time{now.Add(-11 * time.Minute), now.Add(2 * time.Minute)} {
		id := fmt.Sprintf("late-%d", i)
		m := signedMsg(t, admin, domain.Command{ID: id, ResourceID: cluster, Task: domain.TaskPending, IssuedAt: issued.Format(time.RFC3339)}, id)
		if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range events(t, env.JS, key, 2) {
		if ev.Outcome != domain.OutcomeRejected || ev.Code != domain.CodeUnauthorized || !strings.HasPrefix(ev.Message, "expired") {
			t.Errorf("event %+v, want Unauthorized expired", ev)
		}
	}
	if _, rev := record(t, env, key); rev != 0 {
		t.Fatalf("an expired command wrote the record (revision %d)", rev)
	}
}

// TestHandle_SignerKeysRotateWithoutARestart: against one running function, a second key is
// added to the signers file and signs a command; then the old key is removed and a command
// it signs is refused.
func TestHandle_SignerKeysRotateWithoutARestart(t *testing.T) {
	old, _ := nkeys.CreateUser()
	next, _ := nkeys.CreateUser()
	oldPub, _ := old.PublicKey()
	nextPub, _ := next.PublicKey()
	file := filepath.Join(t.TempDir(), "signers.json")
	write := func(keys ...string) {
		t.Helper()
		b, _ := json.Marshal([]signing.Signer{{Name: "alice", PublicKeys: keys, Roles: []signing.Role{signing.RoleAdmin}}})
		// Written whole and renamed, as config management does, so no read sees half a file.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(oldPub)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	auth, err := signing.Watch(ctx, file, true, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{Auth: auth})
	key := domain.MustKey(cluster)
	send := func(kp nkeys.KeyPair, id string, task domain.Task) domain.Event {
		t.Helper()
		if _, err := env.JS.PublishMsg(context.Background(), signedMsg(t, kp, domain.Command{ID: id, ResourceID: cluster, Task: task}, id)); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			for _, ev := range readEvents(t, env.JS, domain.EventSubject(key)) {
				if ev.CommandID == id {
					return ev
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no outcome for %s", id)
			}
		}
	}
	// eventually sends commands until one comes out as want (the file is re-read every 100 ms).
	eventually := func(kp nkeys.KeyPair, prefix string, want domain.Outcome) domain.Event {
		t.Helper()
		for i := range 50 {
			task := []domain.Task{domain.TaskPending, domain.TaskNone}[i%2]
			if ev := send(kp, fmt.Sprintf("%s-%d", prefix, i), task); ev.Outcome == want {
				return ev
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: never %s", prefix, want)
		return domain.Event{}
	}
	if ev := send(old, "old-1", domain.TaskPending); ev.Outcome != domain.OutcomeApplied {
		t.Fatalf("old key before rotation: %+v", ev)
	}
	if ev := send(next, "next-0", domain.TaskNone); ev.Outcome != domain.OutcomeRejected || ev.Code != domain.CodeUnauthorized {
		t.Fatalf("new key before it is added: %+v, want Unauthorized", ev)
	}
	write(oldPub, nextPub)
	if ev := eventually(next, "next", domain.OutcomeApplied); ev.Actor != "alice" {
		t.Fatalf("new key: %+v, want applied as alice", ev)
	}
	write(nextPub)
	ev := eventually(old, "old-after", domain.OutcomeRejected)
	if ev.Code != domain.CodeUnauthorized || !strings.Contains(ev.Message, "not a configured") {
		t.Fatalf("old key after removal: %+v, want Unauthorized (not a configured signer)", ev)
	}
	if ev := send(next, "next-last", domain.TaskPending); ev.Outcome != domain.OutcomeApplied && ev.Code != domain.CodeRequestNotAllowed {
		t.Fatalf("new key after the old one is removed: %+v", ev)
	}
}
