package subscriptions_test

import (
	"errors"
	"testing"
	"time"

	"maintsignals/functions/subscriptions"
	"maintsignals/shared/subscription"
	"maintsignals/test/testenv"
)

// A write on a revision that moved since it was read is a conflict, whether the record or the
// secret moved (the handler then reads again); a stale drop never removes a newer secret.
func TestWrite_ConflictsWhenTheRevisionMoved(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 30*time.Second)
	a, err := subscriptions.New(ctx, env.JS, subscriptions.Config{Log: testenv.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	c, rej := subscription.DecodeCommand([]byte(create("s-1", "crm", rg)), keyOf(t, rg, "crm"), "")
	if rej != nil {
		t.Fatal(rej)
	}
	if _, err := a.WriteCreate(ctx, c, 1, 0, 0); err != nil {
		t.Fatalf("the first write: %v", err)
	}
	for name, revs := range map[string][2]uint64{"the record moved": {0, 1}, "the secret moved": {1, 0}} {
		if _, err := a.WriteCreate(ctx, c, 1, revs[0], revs[1]); !errors.Is(err, subscriptions.ErrConflict) {
			t.Errorf("%s: %v, want a conflict", name, err)
		}
	}
	rev, err := a.SecretRev(ctx, c.Key())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DropSecret(ctx, c.Key(), rev+100); err != nil {
		t.Fatalf("dropping a secret that moved on: %v, want nothing done", err)
	}
	if now, _ := a.SecretRev(ctx, c.Key()); now != rev {
		t.Errorf("the secret went from revision %d to %d: a stale drop removed it", rev, now)
	}
}
