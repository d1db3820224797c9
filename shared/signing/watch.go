package signing

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Watched is the policy of a signers file, read again whenever the file changes: keys are
// added and removed without a restart. A file that does not read or validate is refused with
// an error in the log, and the policy in force stays.
type Watched struct {
	path     string
	required bool
	log      *slog.Logger
	cur      atomic.Pointer[Policy]
	raw      []byte // the content in force
}

// DefaultWatchEvery is how often the signers file is checked for changes.
const DefaultWatchEvery = 2 * time.Second

// Watch loads the signers file (an error if it is invalid) and checks it every period until
// ctx ends.
func Watch(ctx context.Context, path string, required bool, every time.Duration, log *slog.Logger) (*Watched, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errInvalid(err)
	}
	p, err := parsePolicy(path, b, required)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if every <= 0 {
		every = DefaultWatchEvery
	}
	w := &Watched{path: path, required: required, log: log, raw: b}
	w.cur.Store(p)
	go w.watch(ctx, every)
	return w, nil
}

func (w *Watched) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.reload()
		}
	}
}

// reload reads the file and puts its policy in force if it changed and is valid.
func (w *Watched) reload() {
	b, err := os.ReadFile(w.path)
	if err != nil {
		w.log.Error("signers file unreadable; keeping the keys in force", "path", w.path, "err", err)
		return
	}
	if bytes.Equal(b, w.raw) {
		return
	}
	p, err := parsePolicy(w.path, b, w.required)
	if err != nil {
		w.log.Error("signers file invalid; keeping the keys in force", "path", w.path, "err", err)
		return
	}
	w.raw = b
	w.cur.Store(p)
	w.log.Info("signers file changed; new keys in force", "path", w.path, "keys", len(p.signers))
}

// Policy is the policy in force.
func (w *Watched) Policy() *Policy { return w.cur.Load() }

// Verify is Policy.Verify with the policy in force.
func (w *Watched) Verify(body []byte, h nats.Header) (*Signer, *domain.Rejection) {
	return w.Policy().Verify(body, h)
}

// Authorize is Policy.Authorize with the policy in force.
func (w *Watched) Authorize(s *Signer, c domain.Command) *domain.Rejection {
	return w.Policy().Authorize(s, c)
}

// AuthorizePolicy is Policy.AuthorizePolicy with the policy in force.
func (w *Watched) AuthorizePolicy(s *Signer, scope policy.Scope) *domain.Rejection {
	return w.Policy().AuthorizePolicy(s, scope)
}

// AuthorizeSubscription is Policy.AuthorizeSubscription with the policy in force.
func (w *Watched) AuthorizeSubscription(s *Signer, scope policy.Scope) *domain.Rejection {
	return w.Policy().AuthorizeSubscription(s, scope)
}

// Requires reports whether unsigned commands are refused.
func (w *Watched) Requires() bool { return w.required }

// Requires reports whether unsigned commands are refused.
func (p *Policy) Requires() bool { return p.Required }
