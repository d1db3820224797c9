package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// Policies is the policies bucket as one replica sees it: every revision the bucket keeps, per
// scope key, read by one ordered consumer from the first and followed live, so that the policy
// in force at any stored time is a look-up in memory (At). A barrier (see barrier) makes sure
// the view holds every revision stored up to the time asked about before it answers.
type Policies struct {
	stream jetstream.Stream
	log    *slog.Logger

	mu     sync.RWMutex
	revs   map[string][]*Revision // by scope key, oldest first, at most domain.PoliciesHistory
	seen   uint64                 // the last sequence of the bucket's stream applied
	moved  chan struct{}          // closed (and replaced) whenever seen moves
	failed error                  // why the view stopped following, if it did

	barrier barrier
	life    context.Context
}

// Revision is one revision of a scope's policy in the bucket.
type Revision struct {
	Key     string
	Seq     uint64    // the bucket revision
	At      time.Time // when the bucket stored it
	Deleted bool      // a delete: the scope has no policy from then on
	purged  bool      // a purge: the bucket dropped the scope's earlier revisions
	Meta    domain.PolicyMeta
	Value   []byte // the policy document

	once sync.Once
	pol  *policy.Policy
	err  error
}

// Policy compiles the revision's document, once; nil for a delete.
func (r *Revision) Policy() (*policy.Policy, error) {
	if r == nil || r.Deleted {
		return nil, nil
	}
	r.once.Do(func() { r.pol, r.err = policy.ParseStored(r.Value) })
	return r.pol, r.err
}

// ErrPolicyForgotten is returned by At when the revision in force at the time asked about is
// older than the PoliciesHistory revisions the bucket keeps of its scope.
var ErrPolicyForgotten = errors.New("the policy in force then is older than the revisions the bucket keeps")

// OpenPolicies binds to the policies bucket, which provisioning created, and follows it until
// ctx ends.
func OpenPolicies(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (*Policies, error) {
	s, err := js.Stream(ctx, domain.PoliciesBucketStream)
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w (run `maintctl provision`)", domain.PoliciesBucket, err)
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Policies{stream: s, log: log, revs: map[string][]*Revision{}, moved: make(chan struct{}), life: ctx}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.PoliciesFilter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("follow bucket %s: %w", domain.PoliciesBucket, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("follow bucket %s: %w", domain.PoliciesBucket, err)
	}
	go func() { <-ctx.Done(); it.Stop() }()
	go p.follow(it)
	return p, nil
}

// follow applies the bucket's messages in stream order until the iterator stops.
func (p *Policies) follow(it jetstream.MessagesContext) {
	for {
		msg, err := it.Next()
		if err != nil {
			if p.life.Err() == nil {
				p.log.Error("policies view stopped following the bucket", "error", err)
				p.stop(err)
			}
			return
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		p.apply(revisionOf(msg, md))
	}
}

func revisionOf(msg jetstream.Msg, md *jetstream.MsgMetadata) *Revision {
	r, err := newRevision(msg.Subject(), md.Sequence.Stream, md.Timestamp, msg.Headers(), msg.Data())
	if err != nil {
		// A header written by hand: the revision stands, without a ledger (the policies
		// function refuses to build on it).
		r.Meta = domain.PolicyMeta{}
	}
	return r
}

// newRevision reads a message of the bucket's stream; the error is a meta header that does
// not decode (the revision is returned all the same).
func newRevision(subject string, seq uint64, at time.Time, h nats.Header, data []byte) (*Revision, error) {
	if first, err := time.Parse(time.RFC3339Nano, h.Get(domain.HeaderFirstStored)); err == nil {
		at = first // moved by provisioning: in force from when it was first stored
	}
	r := &Revision{Key: domain.KeyFromSubject(subject), Seq: seq, At: at, Value: data}
	switch h.Get(domain.HeaderKVOperation) {
	case domain.KVDelete:
		r.Deleted = true
	case domain.KVPurge:
		r.Deleted, r.purged = true, true
	}
	var err error
	if r.Meta, err = domain.DecodePolicyMeta(h.Get(domain.HeaderPolicyMeta)); err != nil {
		return r, fmt.Errorf("policy %s revision %d: %w: %w", r.Key, seq, ErrCorruptRecord, err)
	}
	return r, nil
}

// LastPolicy reads the last revision of scope key (a delete included) from the bucket's
// stream, at its leader; nil when the scope never had a policy. A meta header that does not
// decode is an error wrapping ErrCorruptRecord.
func LastPolicy(ctx context.Context, bucket jetstream.Stream, key string) (*Revision, error) {
	m, err := bucket.GetLastMsgForSubject(ctx, domain.PolicySubject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", key, err)
	}
	return newRevision(m.Subject, m.Sequence, m.Time, m.Header, m.Data)
}

// PeekPolicy is LastPolicy by a direct get that names the scope's subject: what a reader
// confined to tenants may ask (of its own scopes' policies).
func PeekPolicy(ctx context.Context, js jetstream.JetStream, key string) (*Revision, error) {
	m, err := LastMsg(ctx, js, domain.PoliciesBucketStream, domain.PolicySubject(key))
	if errors.Is(err, ErrNoMessage) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", key, err)
	}
	return newRevision(m.Subject, m.Sequence, m.Time, m.Header, m.Data)
}

// ScanPoliciesUnder is ScanPolicies over the scopes under filter (a subject under
// domain.PoliciesPrefix, such as a tenant's tokens): a consumer whose filter a permission can
// confine, and no stream info first.
func ScanPoliciesUnder(ctx context.Context, js jetstream.JetStream, filter string, fn func(*Revision) error) error {
	return ScanLast(ctx, js, domain.PoliciesBucketStream, filter, func(msg jetstream.Msg, _ uint64) error {
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("scan policies: %w", err)
		}
		return fn(revisionOf(msg, md))
	})
}

// ScanPolicies calls fn with the last revision of every scope of the bucket, in one pass as the
// bucket is when it starts (deletes included: fn tells them by Deleted).
func ScanPolicies(ctx context.Context, bucket jetstream.Stream, fn func(*Revision) error) error {
	info, err := bucket.Info(ctx)
	if err != nil {
		return fmt.Errorf("scan policies: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := bucket.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.PoliciesFilter},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("scan policies: %w", err)
	}
	return Drain(ctx, cons, 0, func(msg jetstream.Msg, _ uint64) error {
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("scan policies: %w", err)
		}
		return fn(revisionOf(msg, md))
	})
}

// apply adds a revision, keeping at most as many per scope as the bucket does (so that every
// replica knows the same revisions whenever it started), and tells the waiters.
func (p *Policies) apply(r *Revision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	revs := p.revs[r.Key]
	if r.purged {
		revs = nil
	}
	revs = append(revs, r)
	if n := len(revs) - domain.PoliciesHistory; n > 0 {
		revs = append([]*Revision(nil), revs[n:]...)
	}
	p.revs[r.Key] = revs
	p.seen = max(p.seen, r.Seq)
	close(p.moved)
	p.moved = make(chan struct{})
}

func (p *Policies) stop(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = err
	close(p.moved)
	p.moved = make(chan struct{})
}

// At returns the revision in force for the entity (or scope) of key when a command was stored
// at t: of the scopes that cover it, from the most specific (policy.CandidateKeys), the first
// whose newest revision stored at or before t is not a delete; nil when none. It first makes
// sure the view holds every revision stored up to t.
func (p *Policies) At(ctx context.Context, key string, t time.Time) (*Revision, error) {
	if err := p.await(ctx, t); err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, k := range policy.CandidateKeys(key) {
		r, err := inForce(p.revs[k], t)
		if err != nil || r != nil {
			return r, err
		}
	}
	return nil, nil
}

// inForce is the newest of revs stored at or before t, nil when it is a delete or there is
// none; ErrPolicyForgotten when the bucket no longer keeps it.
func inForce(revs []*Revision, t time.Time) (*Revision, error) {
	for i := len(revs) - 1; i >= 0; i-- {
		if r := revs[i]; !r.At.After(t) {
			if r.Deleted {
				return nil, nil
			}
			return r, nil
		}
	}
	if len(revs) > 0 && revs[0].Meta.Prev != 0 {
		return nil, fmt.Errorf("%w (scope %s, %d kept)", ErrPolicyForgotten, revs[0].Key, len(revs))
	}
	return nil, nil
}

// Current returns the revision in force now for the entity (or scope) of key, as the view
// stands (Sync first to have it current): At without a time.
func (p *Policies) Current(key string) *Revision {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, k := range policy.CandidateKeys(key) {
		if revs := p.revs[k]; len(revs) > 0 && !revs[len(revs)-1].Deleted {
			return revs[len(revs)-1]
		}
	}
	return nil
}

// Sync waits until the view holds every revision the bucket stored before the call.
func (p *Policies) Sync(ctx context.Context) error { return p.catchUp(ctx) }

// catchUp asks the bucket for its last sequence and waits until the view has applied it.
func (p *Policies) catchUp(ctx context.Context) error {
	info, err := p.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("policies: bucket state: %w", err)
	}
	last := info.State.LastSeq
	for {
		p.mu.RLock()
		seen, moved, failed := p.seen, p.moved, p.failed
		p.mu.RUnlock()
		switch {
		case seen >= last:
			return nil
		case failed != nil:
			return fmt.Errorf("policies: %w", failed)
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("policies: waiting for revision %d (at %d): %w", last, seen, ctx.Err())
		}
	}
}

// Conflict is the conflict of the window the record of key announced with the policy in force
// now as the view stands (policy.Conflict): why the policy does not allow it ("" when it does,
// or none covers the entity), with that policy and its revision. Only a Pending record with a
// window is looked up.
func (p *Policies) Conflict(key string, r domain.Record, now time.Time) (why string, pol *policy.Policy, rev *Revision) {
	if p == nil || r.State != domain.StatePending || r.Window == nil {
		return "", nil, nil
	}
	rev = p.Current(key)
	pol, err := rev.Policy()
	if err != nil || pol == nil {
		return "", nil, nil
	}
	return policy.Conflict(r, pol, rev.At, now), pol, rev
}
