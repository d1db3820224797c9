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
	"maintsignals/shared/dlq"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
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
	if rec.State != domain.StateCustomerActionNeeded || rec.LastCommandID != "newer-32" || len(rec.SignedIDs) != 35 || rec.SignedIDs[0].ID != "announce" {
		t.Fatalf("record %+v, want CustomerActionNeeded from newer-32 and the 35 signed commands remembered", rec)
	}
}

// sendSigned publishes each command signed by kp with its own Nats-Msg-Id, in order, and
// returns the captured messages.
func sendSigned(t *testing.T, env *testenv.Env, kp nkeys.KeyPair, cmds []domain.Command) []*nats.Msg {
	t.Helper()
	var sent []*nats.Msg
	for _, c := range cmds {
		m := signedMsg(t, kp, c, c.ID)
		if _, err := env.JS.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	return sent
}

// appliedInOrder checks that the first events of an entity are the commands applied, in the
// order sent.
func appliedInOrder(t *testing.T, evs []domain.Event, cmds []domain.Command) {
	t.Helper()
	for i, c := range cmds {
		if ev := evs[i]; ev.CommandID != c.ID || ev.Outcome != domain.OutcomeApplied {
			t.Fatalf("event %d: %s %s %s %q, want %s applied", i, ev.CommandID, ev.Outcome, ev.Code, ev.Message, c.ID)
		}
	}
}

// TestHandle_SignedBurstStampedInOneSecondIsApplied: a hundred commands for one cluster, signed
// with one key and stamped with the same whole second (Go's time.RFC3339, as integrators
// stamp), are all applied in order; captured copies of them sent again without a header are not.
func TestHandle_SignedBurstStampedInOneSecondIsApplied(t *testing.T) {
	admin, policy := adminPolicy(t)
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{Auth: policy})
	key := domain.MustKey(cluster)
	second := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	var cmds []domain.Command
	for i := range 100 {
		task := []domain.Task{domain.TaskPending, domain.TaskNone}[i%2]
		cmds = append(cmds, domain.Command{ID: fmt.Sprintf("burst-%d", i), ResourceID: cluster, Task: task, IssuedAt: second})
	}
	sent := sendSigned(t, env, admin, cmds)
	appliedInOrder(t, events(t, env.JS, key, len(cmds)), cmds)
	for _, i := range []int{0, 50, 98} { // a Pending each: it would change the state back
		replay(t, env, sent[i], "")
	}
	evs := events(t, env.JS, key, len(cmds)+3)
	for _, ev := range evs[len(cmds):] {
		if ev.Outcome != domain.OutcomeDuplicate {
			t.Errorf("copy of %s: %s %s %q, want a duplicate", ev.CommandID, ev.Outcome, ev.Code, ev.Message)
		}
	}
	if rec, _ := record(t, env, key); rec.State != domain.StateNone || rec.LastCommandID != "burst-99" {
		t.Fatalf("record %+v, want None from burst-99", rec)
	}
}

// TestHandle_SendersSharingAKeyWithSkewedClocksAreAllApplied: two senders share one key (an
// updater fleet), one clock 30 s behind the other, and interleave their commands: each is
// applied in stream order, over two replicas; copies of them sent again are not.
func TestHandle_SendersSharingAKeyWithSkewedClocksAreAllApplied(t *testing.T) {
	admin, policy := adminPolicy(t)
	env := testenv.Start(t)
	startReplicas(t, env, 2, command.Config{Auth: policy})
	key := domain.MustKey(cluster)
	clocks := []time.Duration{0, -30 * time.Second}
	var cmds []domain.Command
	var sent []*nats.Msg
	for i := range 20 {
		sender := i % 2
		task := []domain.Task{domain.TaskPending, domain.TaskNone}[i%2]
		c := domain.Command{ID: fmt.Sprintf("sender%d-%d", sender, i), ResourceID: cluster, Task: task,
			IssuedAt: time.Now().UTC().Add(clocks[sender]).Format(time.RFC3339)}
		cmds = append(cmds, c)
		sent = append(sent, sendSigned(t, env, admin, []domain.Command{c})...)
	}
	appliedInOrder(t, events(t, env.JS, key, len(cmds)), cmds)
	for _, m := range sent {
		replay(t, env, m, "")
	}
	for _, ev := range events(t, env.JS, key, 2*len(cmds))[len(cmds):] {
		if ev.Outcome == domain.OutcomeApplied {
			t.Errorf("a copy of %s was applied again", ev.CommandID)
		}
	}
	if rec, _ := record(t, env, key); rec.State != domain.StateNone || rec.LastCommandID != "sender1-19" {
		t.Fatalf("record %+v, want None from sender1-19", rec)
	}
}

// TestHandle_SignedDeadLetterReplayedAfterNewerCommandsIsApplied: a signed command dead-lettered
// in a bucket outage, sent again with `maintctl dlq replay` after newer signed commands of its
// entity were applied, is applied: it never was. A copy of it sent again after that is not.
func TestHandle_SignedDeadLetterReplayedAfterNewerCommandsIsApplied(t *testing.T) {
	admin, policy := adminPolicy(t)
	env := testenv.Start(t)
	st, err := store.Open(context.Background(), env.JS)
	if err != nil {
		t.Fatal(err)
	}
	outage := &testenv.Outage{Records: st}
	startReplicas(t, env, 1, command.Config{Auth: policy, Records: outage, MaxDeliver: 2})
	key := domain.MustKey(cluster)
	ctx := testenv.Context(t, time.Minute)

	outage.Down.Store(true)
	late := sendSigned(t, env, admin, []domain.Command{{ID: "late", ResourceID: cluster, Task: domain.TaskPending}})[0]
	if ev := events(t, env.JS, key, 1)[0]; ev.Outcome != domain.OutcomeDeadLettered {
		t.Fatalf("in the outage: %+v, want dead_lettered", ev)
	}
	outage.Down.Store(false)
	newer := []domain.Command{{ID: "newer-0", ResourceID: cluster, Task: domain.TaskCustomerActionNeeded}, {ID: "newer-1", ResourceID: cluster, Task: domain.TaskNone}}
	sendSigned(t, env, admin, newer)
	appliedInOrder(t, events(t, env.JS, key, 3)[1:], newer)
	letters, err := dlq.List(ctx, env.JS)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters %+v (%v), want the one", letters, err)
	}
	if _, err := dlq.Replay(ctx, env.JS, letters[0].Seq); err != nil {
		t.Fatal(err)
	}
	replay(t, env, late, "")
	evs := events(t, env.JS, key, 5)
	if evs[3].CommandID != "late" || evs[3].Outcome != domain.OutcomeApplied || evs[4].Outcome != domain.OutcomeDuplicate {
		t.Fatalf("the dead letter sent again, then a copy: %+v, %+v; want applied, then a duplicate", evs[3], evs[4])
	}
	if rec, _ := record(t, env, key); rec.State != domain.StatePending || rec.LastCommandID != "late" {
		t.Fatalf("record %+v, want Pending from late", rec)
	}
}

// TestHandle_CapturedSignedCommandRefusedAfterARestart: the memory of signed commands is the
// record's, so a copy sent after the whole stack restarted (functions and server, the
// duplicate window of the stream gone with the header left out) has no second effect.
func TestHandle_CapturedSignedCommandRefusedAfterARestart(t *testing.T) {
	admin, policy := adminPolicy(t)
	dir := t.TempDir()
	env := testenv.StartIn(t, dir)
	stop := startReplicas(t, env, 1, command.Config{Auth: policy})
	key := domain.MustKey(cluster)
	cmds := []domain.Command{{ID: "announce", ResourceID: cluster, Task: domain.TaskPending}, {ID: "clear", ResourceID: cluster, Task: domain.TaskNone}}
	captured := sendSigned(t, env, admin, cmds)[0]
	appliedInOrder(t, events(t, env.JS, key, 2), cmds)
	stop()
	env.NC.Close()
	env.Server.Stop()

	env = testenv.StartIn(t, dir)
	startReplicas(t, env, 1, command.Config{Auth: policy})
	replay(t, env, captured, "")
	if ev := events(t, env.JS, key, 3)[2]; ev.CommandID != "announce" || ev.Outcome != domain.OutcomeDuplicate {
		t.Fatalf("copy after the restart: %+v, want a duplicate", ev)
	}
	if rec, _ := record(t, env, key); rec.State != domain.StateNone {
		t.Fatalf("record %+v, want None", rec)
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
