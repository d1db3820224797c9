package campaignstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
	"maintsignals/shared/store"
)

// What a plan depends on besides its spec: the list, the tracked entities and the policies.

// ErrNoList wraps a list that the Object Store does not hold.
var ErrNoList = errors.New("no such list")

// PutList stores a list's bytes in the campaign-lists Object Store under its SHA-256 (as
// ParseList computed it), unless it is there already; it returns whether it stored it.
func PutList(ctx context.Context, js jetstream.JetStream, l *campaign.List, data []byte) (bool, error) {
	obs, err := js.ObjectStore(ctx, domain.CampaignListsBucket)
	if err != nil {
		return false, bucketError(domain.CampaignListsBucket, err)
	}
	if info, err := obs.GetInfo(ctx, l.SHA256); err == nil && !info.Deleted {
		return false, nil
	}
	if _, err := obs.PutBytes(ctx, l.SHA256, data); err != nil {
		return false, fmt.Errorf("store list %s: %w", l.SHA256, err)
	}
	return true, nil
}

// ReadList reads the list ref names and checks it is the one the spec says (its SHA-256 and
// count).
func ReadList(ctx context.Context, js jetstream.JetStream, ref campaignspec.ListRef) (*campaign.List, error) {
	obs, err := js.ObjectStore(ctx, domain.CampaignListsBucket)
	if err != nil {
		return nil, bucketError(domain.CampaignListsBucket, err)
	}
	b, err := obs.GetBytes(ctx, ref.Object)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s holds no object %q", ErrNoList, domain.CampaignListsBucket, ref.Object)
	}
	if err != nil {
		return nil, fmt.Errorf("read list %s: %w", ref.Object, err)
	}
	l, err := campaign.ParseList(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return l, l.Check(ref)
}

// Select is the selection of spec s: the list (nil when it has none) and the entities tracked
// now under its prefixes, refused (InvalidParameter, selection) when it is empty.
func Select(ctx context.Context, js jetstream.JetStream, s *campaignspec.Spec, list *campaign.List) (campaign.Selection, *domain.Rejection, error) {
	var tracked iter.Seq2[string, string]
	var scanErr error
	if len(s.Prefixes) > 0 {
		st, err := store.Open(ctx, js)
		if err != nil {
			return nil, nil, err
		}
		tracked = func(yield func(string, string) bool) {
			stop := errors.New("stop")
			err := st.Scan(ctx, func(e store.Entry, derr error) error {
				if derr == nil && !yield(e.Key, e.Record.ResourceID) {
					return stop
				}
				return nil
			})
			if err != nil && !errors.Is(err, stop) {
				scanErr = err
			}
		}
	}
	sel, err := campaign.Select(list, s.Prefixes, tracked)
	if err = errors.Join(err, scanErr); err != nil {
		return nil, nil, fmt.Errorf("select: %w", err)
	}
	return sel, campaign.CheckSelection(sel), nil
}

// PolicyCache reads the policies bucket, keeping each policy compiled until its revision
// changes. It is safe for concurrent use.
type PolicyCache struct {
	mu       sync.Mutex
	compiled map[string]cachedPolicy
}

type cachedPolicy struct {
	rev uint64
	p   *policy.Policy
}

// Load is the policy in force for each entity, from the policies bucket as it is now: the
// most specific scope that covers the entity (nil: none does, or there is no bucket). It
// returns the same *policy.Policy for the entities of one scope, as the planner wants.
func (pc *PolicyCache) Load(ctx context.Context, js jetstream.JetStream) (campaign.Policies, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	next := map[string]cachedPolicy{}
	err := store.ScanLast(ctx, js, domain.PoliciesBucketStream, domain.PoliciesFilter, func(m jetstream.Msg, rev uint64) error {
		scope := domain.KeyFromSubject(m.Subject())
		if store.Deleted(m) {
			return nil
		}
		if old, ok := pc.compiled[scope]; ok && old.rev == rev {
			next[scope] = old
			return nil
		}
		if p, err := policy.ParseStored(m.Data()); err == nil { // one that no longer reads covers nothing
			next[scope] = cachedPolicy{rev: rev, p: p}
		}
		return nil
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		pc.compiled = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	pc.compiled = next
	if len(next) == 0 {
		return nil, nil
	}
	return func(key string) *policy.Policy {
		for _, k := range policy.CandidateKeys(key) {
			if c, ok := next[k]; ok {
				return c.p
			}
		}
		return nil
	}, nil
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
