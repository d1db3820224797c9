package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

const (
	subScope = "/subscriptions/s1"
	rgScope  = "/subscriptions/s1/resourceGroups/rg-a"
	entity   = "/subscriptions/s1/resourceGroups/rg-a/providers/p/clusters/c1"
	other    = "/subscriptions/s1/resourceGroups/rg-b/providers/p/clusters/c2"
)

// putPolicy writes a revision of scope's policy as the policies function does (the document,
// its meta header); doc "" deletes it. It returns the revision and when the bucket stored it.
func putPolicy(t *testing.T, js jetstream.JetStream, scope, doc string, prev uint64) (uint64, time.Time) {
	t.Helper()
	ctx := context.Background()
	m := nats.NewMsg(domain.PolicySubject(domain.MustKey(scope)))
	if doc == "" {
		m.Header.Set(domain.HeaderKVOperation, domain.KVDelete)
	} else {
		m.Data = []byte(fmt.Sprintf(`{"scope": %q, %s}`, scope, doc))
	}
	meta, _ := domain.EncodePolicyMeta(domain.PolicyMeta{Prev: prev, Actor: "test"})
	m.Header.Set(domain.HeaderPolicyMeta, meta)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, domain.PoliciesBucketStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence, raw.Time
}

func openPolicies(t *testing.T, js jetstream.JetStream) *store.Policies {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := store.OpenPolicies(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func minNoticeAt(t *testing.T, p *store.Policies, key string, at time.Time) string {
	t.Helper()
	r, err := p.At(context.Background(), key, at)
	if err != nil {
		t.Fatalf("At(%s, %s): %v", key, at, err)
	}
	if r == nil {
		return "none"
	}
	pol, err := r.Policy()
	if err != nil {
		t.Fatal(err)
	}
	return pol.Scope().ID + " " + pol.Document().MinNotice
}

// TestPolicies_AtIsThePolicyOfTheStoredTime: each look-up finds the newest revision stored at
// or before the time asked about, of the most specific scope that has one then, a delete
// letting the wider scope apply again; the view started after the writes and one started
// before them agree.
func TestPolicies_AtIsThePolicyOfTheStoredTime(t *testing.T) {
	env := testenv.Start(t)
	early := openPolicies(t, env.JS)
	key := domain.MustKey(entity)
	steps := []struct{ scope, doc string }{
		{subScope, `"minNotice": "1h"`},
		{rgScope, `"minNotice": "2h"`},
		{rgScope, `"minNotice": "3h"`},
		{rgScope, ""},
		{subScope, `"minNotice": "4h"`},
	}
	at := make([]time.Time, len(steps))
	var prev = map[string]uint64{}
	for i, s := range steps {
		time.Sleep(2 * time.Millisecond) // distinct stored times
		prev[s.scope], at[i] = putPolicy(t, env.JS, s.scope, s.doc, prev[s.scope])
	}
	late := openPolicies(t, env.JS)
	want := []string{"none", subScope + " 1h", rgScope + " 2h", rgScope + " 3h", subScope + " 1h", subScope + " 4h"}
	for _, p := range []*store.Policies{early, late} {
		for i, w := range want {
			asked := at[0].Add(-time.Millisecond)
			if i > 0 {
				asked = at[i-1] // at the very stored time: it counts
			}
			if got := minNoticeAt(t, p, key, asked); got != w {
				t.Errorf("policy in force at step %d: %s, want %s", i, got, w)
			}
		}
		if got := minNoticeAt(t, p, domain.MustKey(other), at[2]); got != subScope+" 1h" {
			t.Errorf("another resource group's entity: %s, want the subscription's", got)
		}
		if r := p.Current(key); r == nil || r.Seq != prev[subScope] {
			t.Errorf("Current = %+v, want the subscription's revision %d", r, prev[subScope])
		}
	}
}

// TestPolicies_AtWaitsForWhatWasStoredBefore: a revision written on another connection just
// before the look-up is in the answer, however far the view's consumer is behind: the barrier.
func TestPolicies_AtWaitsForWhatWasStoredBefore(t *testing.T) {
	env := testenv.Start(t)
	p := openPolicies(t, env.JS)
	other := testenv.JetStream(t, testenv.Connect(t, env.Server))
	key := domain.MustKey(entity)
	var prev uint64
	for i := range 50 {
		var stored time.Time
		prev, stored = putPolicy(t, other, rgScope, fmt.Sprintf(`"minNotice": "%dh"`, i+1), prev)
		if got, want := minNoticeAt(t, p, key, stored), fmt.Sprintf("%s %dh", rgScope, i+1); got != want {
			t.Fatalf("right after revision %d: %s, want %s", i, got, want)
		}
	}
	// Many look-ups at once share rounds and all see the last revision.
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.At(context.Background(), key, time.Now())
			if err != nil || r == nil || r.Seq != prev {
				errs <- fmt.Sprintf("%+v %v", r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent look-up: %s", e)
	}
}

// TestPolicies_AtRefusesToGuessAForgottenRevision: with more revisions of a scope than the bucket
// keeps, a time before the oldest kept is refused rather than answered with another policy, on
// a view that saw them all and on one started after.
func TestPolicies_AtRefusesToGuessAForgottenRevision(t *testing.T) {
	env := testenv.Start(t)
	early := openPolicies(t, env.JS)
	var prev uint64
	var first time.Time
	for i := range domain.PoliciesHistory + 2 {
		var at time.Time
		prev, at = putPolicy(t, env.JS, rgScope, fmt.Sprintf(`"minNotice": "%dh"`, i+1), prev)
		if i == 0 {
			first = at
		}
	}
	late := openPolicies(t, env.JS)
	for name, p := range map[string]*store.Policies{"early": early, "late": late} {
		if _, err := p.At(context.Background(), domain.MustKey(entity), first); !errors.Is(err, store.ErrPolicyForgotten) {
			t.Errorf("%s view at the first revision's time: %v, want ErrPolicyForgotten", name, err)
		}
		if got := minNoticeAt(t, p, domain.MustKey(entity), time.Now()); got != fmt.Sprintf("%s %dh", rgScope, domain.PoliciesHistory+2) {
			t.Errorf("%s view now: %s", name, got)
		}
	}
}

// BenchmarkPolicies_At is what a policy look-up costs a command: in memory, for a stored time
// the view is known to cover (a backlog, a redelivery), and with a barrier round for a command
// stored just now and looked up alone (under load, one round serves many commands).
func BenchmarkPolicies_At(b *testing.B) {
	env := testenv.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := store.OpenPolicies(ctx, env.JS, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := nats.NewMsg(domain.PolicySubject(domain.MustKey(rgScope)))
	m.Data = []byte(`{"scope": "` + rgScope + `", "minNotice": "1h"}`)
	if _, err := env.JS.PublishMsg(ctx, m); err != nil {
		b.Fatal(err)
	}
	key := domain.MustKey(entity)
	past := time.Now()
	if _, err := p.At(ctx, key, past); err != nil {
		b.Fatal(err)
	}
	b.Run("covered", func(b *testing.B) {
		for b.Loop() {
			if r, err := p.At(ctx, key, past); err != nil || r == nil {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("barrier", func(b *testing.B) {
		for b.Loop() {
			if r, err := p.At(ctx, key, time.Now()); err != nil || r == nil {
				b.Fatal(r, err)
			}
		}
	})
}
