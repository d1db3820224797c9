package command_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"maintsignals/functions/command"
	"maintsignals/shared/domain"
	"maintsignals/shared/signing"
	"maintsignals/test/testenv"
)

func TestHandle_SignedCommandsOnly(t *testing.T) {
	admin, _ := nkeys.CreateUser()
	updater, _ := nkeys.CreateUser()
	stranger, _ := nkeys.CreateUser()
	adminPub, _ := admin.PublicKey()
	updaterPub, _ := updater.PublicKey()
	policy, err := signing.NewPolicy(true, []signing.Signer{
		{Name: "alice", PublicKey: adminPub, Roles: []signing.Role{signing.RoleAdmin}},
		{Name: "update-robot", PublicKey: updaterPub, Roles: []signing.Role{signing.RoleUpdater}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	startReplicas(t, env, 1, command.Config{Auth: policy})
	key := domain.MustKey(cluster)

	// publish sends cmd signed by kp (nil: unsigned); tamper changes the body after signing.
	publish := func(cmd domain.Command, kp nkeys.KeyPair, tamper bool, withHeader bool) {
		t.Helper()
		if kp != nil && cmd.IssuedAt == "" {
			cmd.IssuedAt = time.Now().UTC().Format(time.RFC3339Nano)
		}
		body, _ := json.Marshal(cmd)
		m := nats.NewMsg(domain.CommandSubject(key))
		if kp != nil {
			if err := signing.Sign(kp, body, m.Header); err != nil {
				t.Fatal(err)
			}
		}
		if tamper {
			cmd.Force = true
			body, _ = json.Marshal(cmd)
		}
		m.Data = body
		if withHeader {
			m.Header.Set(domain.HeaderMsgID, cmd.ID)
		}
		if _, err := env.JS.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name    string
		cmd     domain.Command
		kp      nkeys.KeyPair
		tamper  bool
		outcome domain.Outcome
		code    domain.Code
		actor   string
		to      domain.State
	}{
		{"unsigned", domain.Command{ID: "s-1", ResourceID: cluster, Task: domain.TaskPending}, nil, false, domain.OutcomeRejected, domain.CodeUnauthorized, "", domain.StateNone},
		{"unknown key", domain.Command{ID: "s-2", ResourceID: cluster, Task: domain.TaskPending}, stranger, false, domain.OutcomeRejected, domain.CodeUnauthorized, "", domain.StateNone},
		{"body changed after signing", domain.Command{ID: "s-3", ResourceID: cluster, Task: domain.TaskPending}, admin, true, domain.OutcomeRejected, domain.CodeUnauthorized, "", domain.StateNone},
		{"updater may not announce", domain.Command{ID: "s-4", ResourceID: cluster, Task: domain.TaskPending}, updater, false, domain.OutcomeRejected, domain.CodeUnauthorized, "", domain.StateNone},
		{"admin announces; self-declared actor ignored", domain.Command{ID: "s-5", ResourceID: cluster, Task: domain.TaskPending, Actor: "mallory"}, admin, false, domain.OutcomeApplied, "", "alice", domain.StatePending},
		{"admin starts the update", domain.Command{ID: "s-6", ResourceID: cluster, Task: domain.TaskEverything}, admin, false, domain.OutcomeApplied, "", "alice", domain.StatePlanned},
		{"admin may not report an outcome", domain.Command{ID: "s-7", ResourceID: cluster, Task: domain.TaskUpdateSucceeded}, admin, false, domain.OutcomeRejected, domain.CodeUnauthorized, "", domain.StatePlanned},
		{"updater reports success", domain.Command{ID: "s-8", ResourceID: cluster, Task: domain.TaskUpdateSucceeded}, updater, false, domain.OutcomeApplied, "", "update-robot", domain.StateNone},
	}
	for _, s := range steps {
		publish(s.cmd, s.kp, s.tamper, true)
	}
	// An old signed command sent again (past the stream's window, no header): a duplicate.
	publish(steps[4].cmd, admin, false, false)

	evs := events(t, env.JS, key, len(steps)+1)
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			ev := evs[i]
			if ev.CommandID != s.cmd.ID || ev.Outcome != s.outcome || ev.Code != s.code || ev.Actor != s.actor || ev.To != s.to {
				t.Fatalf("event %+v, want %s %s actor %q to %s", ev, s.outcome, s.code, s.actor, s.to)
			}
		})
	}
	if last := evs[len(steps)]; last.Outcome != domain.OutcomeDuplicate || last.CommandID != "s-5" {
		t.Fatalf("replayed signed command: %+v, want a duplicate", last)
	}
	rec, _ := record(t, env, key)
	if rec.State != domain.StateNone || rec.LastCommandID != "s-8" {
		t.Fatalf("record %+v", rec)
	}
}

// TestFunction_WarnsOnceWhenCommandsAreAcceptedUnsigned: a replica started without required
// signatures says so once in its log, so an unsigned production deployment does not go
// unnoticed; one that requires them says nothing of the kind.
func TestFunction_WarnsOnceWhenCommandsAreAcceptedUnsigned(t *testing.T) {
	_, required := adminPolicy(t)
	for _, tc := range []struct {
		name string
		auth command.Authority
		want int
	}{{"no signers", nil, 1}, {"signatures required", required, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.Start(t)
			var logs testenv.SyncBuffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			startReplicas(t, env, 1, command.Config{Auth: tc.auth, Log: log})
			send(t, env.JS, domain.Command{ID: "c-1", ResourceID: cluster, Task: domain.TaskNone})
			events(t, env.JS, domain.MustKey(cluster), 1)
			if got := strings.Count(logs.String(), "commands are accepted unsigned"); got != tc.want {
				t.Fatalf("%d warnings, want %d:\n%s", got, tc.want, logs.String())
			}
		})
	}
}
