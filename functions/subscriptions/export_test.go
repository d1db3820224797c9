package subscriptions

import (
	"context"

	"maintsignals/shared/subscription"
)

// ErrConflict is errConflict, for the tests of the package's callers.
var ErrConflict = errConflict

// WriteCreate writes the create cmd, stored at seq, at the record's revision rev and the
// secret's secretRev, as the handler does.
func (a *Applier) WriteCreate(ctx context.Context, cmd subscription.Command, seq, rev, secretRev uint64) (uint64, error) {
	dec := decide(current{}, cmd, delivery{Seq: seq}, a.maxAge, a.now())
	return a.write(ctx, cmd.Key(), rev, secretRev, dec)
}

// SecretRev is the last sequence of the secret of key.
func (a *Applier) SecretRev(ctx context.Context, key string) (uint64, error) {
	_, rev, err := a.load(ctx, key)
	return rev, err
}

// DropSecret drops the secret of key, expecting it at secretRev.
func (a *Applier) DropSecret(ctx context.Context, key string, secretRev uint64) error {
	return a.dropSecret(ctx, key, secretRev)
}
