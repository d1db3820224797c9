package provision_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/store"
	"maintsignals/test/testenv"
)

// A deployment provisioned before the partitions were pinned (one command in flight, any
// replica) is moved over in place: the durable consumers keep their position.
func TestRun_UnpinnedPartitionConsumerIsMovedToPinnedInPlace(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c, _ := env.JS.Consumer(ctx, domain.CommandsStream, domain.CommandConsumer(0))
	cfg := c.CachedInfo().Config
	cfg.PriorityPolicy = jetstream.PriorityPolicyNone
	cfg.PriorityGroups = nil
	cfg.PinnedTTL = 0
	cfg.MaxAckPending = 1
	if err := env.JS.DeleteConsumer(ctx, domain.CommandsStream, cfg.Durable); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS.CreateConsumer(ctx, domain.CommandsStream, cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Run(ctx, env.JS, provision.Config{})
	if err != nil {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	c, err = env.JS.Consumer(ctx, domain.CommandsStream, cfg.Durable)
	if err != nil {
		t.Fatal(err)
	}
	got := c.CachedInfo().Config
	want := provision.DefaultConfig()
	if got.PriorityPolicy != jetstream.PriorityPolicyPinned || got.MaxAckPending != want.InFlight || got.PinnedTTL != domain.PinnedTTL(want.AckWait) {
		t.Errorf("after provisioning: policy %v, max ack pending %d, pinned TTL %s; want pinned, %d, %s",
			got.PriorityPolicy, got.MaxAckPending, got.PinnedTTL, want.InFlight, domain.PinnedTTL(want.AckWait))
	}
}

// A deployment provisioned before the ticks were shared in shards has one tick consumer per
// function. Provisioning again creates the shard consumers and deletes the single ones, so
// that a replica of the older version still running stops emitting the whole fleet beside
// the shards (it idles until it is replaced).
func TestRun_SingleTickConsumersGiveWayToShards(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Shards = 2 }))
	ctx := testenv.Context(t, time.Minute)
	for _, name := range []string{domain.EmitterConsumer, domain.NoticesConsumer} {
		if _, err := env.JS.CreateConsumer(ctx, domain.ScheduleStream, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: domain.TickSubject, AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverNewPolicy, MaxAckPending: 1, AckWait: 30 * time.Second, MaxDeliver: 3,
		}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := provision.Run(ctx, env.JS, env.Config)
	if err != nil {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	if got := consumerNames(t, env.JS); !slices.Equal(got, []string{"campaign", "emitter-s0", "emitter-s1", "notices-s0", "notices-s1"}) {
		t.Errorf("schedule consumers after provisioning: %v, want the shard consumers and the campaign function's only", got)
	}
	deleted := 0
	for _, ch := range rep {
		if ch.Action == provision.Deleted {
			deleted++
		}
	}
	if deleted != 2 || !rep.Changed() {
		t.Errorf("report shows %d deletions, want the 2 single consumers:\n%v", deleted, rep)
	}

	// Fewer shards: the surplus shard consumers go, the others learn the new count.
	cfg := env.Config
	cfg.Shards = 1
	if rep, err := provision.Run(ctx, env.JS, cfg); err != nil {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	if got := consumerNames(t, env.JS); !slices.Equal(got, []string{"campaign", "emitter-s0", "notices-s0"}) {
		t.Errorf("schedule consumers with one shard: %v", got)
	}
	c, err := env.JS.Consumer(ctx, domain.ScheduleStream, domain.EmitterShardConsumer(0))
	if err != nil {
		t.Fatal(err)
	}
	if sh, err := domain.ShardFromMetadata(c.CachedInfo().Config.Durable, c.CachedInfo().Config.Metadata); err != nil || sh.Of != 1 {
		t.Errorf("emitter-s0 after going to one shard: %v, %v", sh, err)
	}
	if rep, err := provision.Run(ctx, env.JS, cfg); err != nil || rep.Changed() {
		t.Errorf("provisioning again changed something (%v):\n%v", err, rep)
	}
}

func consumerNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), domain.ScheduleStream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := s.ConsumerNames(context.Background())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// A deployment of the first layout keeps its records in one bucket under the entity key.
// Provisioning moves each into its cell under its located key, keeps what a cell holds
// already (written since), and removes the old bucket; provisioning again changes nothing.
// The events are not touched: the history stays.
func TestRun_RecordsOfTheFirstLayoutMoveIntoTheCells(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, time.Minute)
	old, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: domain.Bucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	want := map[string]domain.Record{}
	for i := range n {
		id := fmt.Sprintf("/subscriptions/s%d/resourceGroups/rg%d/providers/p/c/c%03d", i%3, i%7, i)
		r := domain.Record{ResourceID: id, State: domain.States[i%len(domain.States)], LastCommandID: fmt.Sprintf("cmd-%d", i),
			LastCommandSeq: uint64(i + 1), Version: domain.RecordVersion}
		if i%50 == 0 {
			r = domain.Record{ResourceID: id, State: domain.StateNone, ForgottenAt: time.Now().UTC().Truncate(time.Second), LastCommandSeq: uint64(i + 1)}
		}
		b, err := domain.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.Put(ctx, domain.MustKey(id), b); err != nil {
			t.Fatal(err)
		}
		want[domain.MustKey(id)] = r
	}
	// A key deleted in the old bucket stays gone; one a cell holds already keeps the cell's.
	gone := domain.MustKey("/subscriptions/s1/resourceGroups/rg1/providers/p/c/c001")
	if err := old.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	delete(want, gone)
	newer := domain.MustKey("/subscriptions/s2/resourceGroups/rg2/providers/p/c/c002")
	st, _ := store.Open(ctx, env.JS)
	r := want[newer]
	r.LastCommandID, r.LastCommandSeq = "since", 1000
	if _, err := st.Put(ctx, newer, store.Versioned{}, r); err != nil {
		t.Fatal(err)
	}
	want[newer] = r
	// The events and notices of the first layout: maint.evt.<key> in MAINT_EVENTS,
	// maint.notice.<key> in MAINT_NOTICES.
	evs, err := env.JS.Stream(ctx, domain.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	evCfg := evs.CachedInfo().Config
	evCfg.Subjects = append(evCfg.Subjects, domain.EventPrefix+"*")
	if _, err := env.JS.UpdateStream(ctx, evCfg); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS.CreateStream(ctx, jetstream.StreamConfig{Name: domain.NoticesStream, Subjects: []string{domain.NoticePrefix + "*"}}); err != nil {
		t.Fatal(err)
	}
	oldKeys := []string{newer, gone, domain.MustKey("/subscriptions/s0/resourceGroups/rg0/providers/p/c/c000")}
	for i, key := range oldKeys {
		for j := range 3 {
			m := nats.NewMsg(domain.EventPrefix + key)
			m.Header.Set(domain.HeaderMsgID, fmt.Sprintf("old-%d-%d", i, j))
			m.Data = []byte(fmt.Sprintf(`{"commandId":"old-%d-%d","outcome":"applied"}`, i, j))
			if _, err := env.JS.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		m := nats.NewMsg(domain.NoticePrefix + key)
		m.Data = []byte(fmt.Sprintf(`{"noticeId":"n-%d","kind":"reminder"}`, i))
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := provision.Run(ctx, env.JS, provision.Config{})
	if err != nil {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	moved := slices.IndexFunc(rep, func(c provision.Change) bool { return c.Kind == "migrate" })
	if moved < 0 || rep[moved].Action != provision.Updated || !slices.Contains(rep[moved].Fields, fmt.Sprintf("%d records moved", n-2)) ||
		!slices.Contains(rep[moved].Fields, "1 already there") {
		t.Errorf("report: %v", rep)
	}
	for key, w := range want {
		got, rev, err := st.Get(ctx, key)
		if err != nil || rev == 0 || got.LastCommandID != w.LastCommandID || got.State != w.State || !got.ForgottenAt.Equal(w.ForgottenAt) {
			t.Errorf("%s: %+v rev %d (%v), want %+v", key, got, rev, err, w)
		}
	}
	if got, rev, err := st.Get(ctx, gone); err != nil || rev != 0 {
		t.Errorf("the deleted key reads %+v rev %d (%v), want never seen", got, rev, err)
	}
	if _, err := env.JS.Stream(ctx, "KV_"+domain.Bucket); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the old bucket is still there (%v)", err)
	}
	// Every event and notice moved into its cell under the new subject, in order; the old
	// subjects hold nothing, MAINT_NOTICES is gone and MAINT_EVENTS keeps the rest.
	for i, key := range oldKeys {
		got := testenv.Events(t, env.JS, domain.EventSubject(key))
		if len(got) != 3 || got[0].CommandID != fmt.Sprintf("old-%d-0", i) || got[2].CommandID != fmt.Sprintf("old-%d-2", i) {
			t.Errorf("%s: events %+v, want its 3 in order", key, got)
		}
		n := 0
		testenv.ReadStream(t, env.JS, domain.NoticeStreamOf(key), func(m jetstream.Msg) {
			if m.Subject() == domain.NoticeSubject(key) {
				n++
			}
		})
		if n != 1 {
			t.Errorf("%s: %d notices in its cell, want 1", key, n)
		}
	}
	if _, err := env.JS.Stream(ctx, domain.NoticesStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("MAINT_NOTICES is still there (%v)", err)
	}
	if evs, err := env.JS.Stream(ctx, domain.EventsStream); err != nil || evs.CachedInfo().State.Msgs != 0 || slices.Contains(evs.CachedInfo().Config.Subjects, domain.EventPrefix+"*") {
		t.Errorf("MAINT_EVENTS after the move: %v, %+v", err, evs.CachedInfo())
	}
	rep, err = provision.Run(ctx, env.JS, provision.Config{})
	if err != nil || rep.Changed() {
		t.Errorf("provisioning again: %v\n%v", err, rep)
	}
}

// The campaigns' entity phases of the first layout (<id>.<key>) move to their located keys,
// where a customer's permissions can name them; a phase written at its new key since stays,
// and no old key is left behind.
func TestRun_CampaignPhasesOfTheFirstLayoutMoveToLocatedKeys(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := env.JS.KeyValue(ctx, domain.CampaignEntitiesBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{
		domain.MustKey("/subscriptions/s0/resourceGroups/rg0/providers/p/c/c0"),
		domain.MustKey("/subscriptions/s1/resourceGroups/rg1/providers/p/c/c1"),
		domain.MustKey("/subscriptions/s1/providers/p/c/c2"),
	}
	for i, key := range keys {
		if _, err := kv.Put(ctx, domain.CampaignEntityFirstLayout("pucm", key), fmt.Appendf(nil, `{"phase":"old-%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, domain.CampaignEntityKey("pucm", keys[1]), []byte(`{"phase":"since"}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Run(ctx, env.JS, provision.Config{})
	if err != nil || !slices.ContainsFunc(rep, func(c provision.Change) bool {
		return c.Kind == "migrate" && c.Action == provision.Updated && slices.Contains(c.Fields, "3 phases moved")
	}) {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	for i, want := range []string{`{"phase":"old-0"}`, `{"phase":"since"}`, `{"phase":"old-2"}`} {
		e, err := kv.Get(ctx, domain.CampaignEntityKey("pucm", keys[i]))
		if err != nil || string(e.Value()) != want {
			t.Errorf("%s: %v, want %s", keys[i], err, want)
		}
	}
	s, err := env.JS.Stream(ctx, "KV_"+domain.CampaignEntitiesBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+domain.CampaignEntitiesBucket+".>"))
	if err != nil || len(info.State.Subjects) != len(keys) || info.State.Msgs != uint64(len(keys)) {
		t.Errorf("the bucket holds %v (%v), want the %d located keys alone", info.State.Subjects, err, len(keys))
	}
	if rep, err := provision.Run(ctx, env.JS, provision.Config{}); err != nil || rep.Changed() {
		t.Errorf("provisioning again: %v\n%v", err, rep)
	}
}

// The policies of the first layout (the bucket keyed by the scope key alone) move to their
// located keys with every revision the bucket kept, in order, each in force from when it was
// first stored: a command stored between two revisions is still judged by the first.
func TestRun_PoliciesOfTheFirstLayoutMoveToLocatedKeys(t *testing.T) {
	env := testenv.Start(t)
	ctx := testenv.Context(t, 30*time.Second)
	scope := "/subscriptions/s0/resourceGroups/rg0"
	key := domain.MustKey(scope)
	put := func(doc string) time.Time {
		m := nats.NewMsg(domain.PoliciesPrefix + key)
		m.Data = []byte(`{"scope": "` + scope + `", ` + doc + `}`)
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		return time.Now()
	}
	between := put(`"minNotice": "24h"`)
	put(`"minNotice": "48h"`)
	other := "/subscriptions/s1"
	if _, err := env.JS.Publish(ctx, domain.PoliciesPrefix+domain.MustKey(other), []byte(`{"scope": "`+other+`", "minNotice": "1h"}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := provision.Run(ctx, env.JS, provision.Config{})
	if err != nil || !slices.ContainsFunc(rep, func(c provision.Change) bool {
		return c.Kind == "migrate" && c.Action == provision.Updated && slices.Contains(c.Fields, "3 revisions moved")
	}) {
		t.Fatalf("provision: %v\n%v", err, rep)
	}
	view, err := store.OpenPolicies(ctx, env.JS, testenv.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	entity := domain.MustKey(scope + "/providers/p/c/c0")
	for at, want := range map[time.Time]string{between: "24h0m0s", time.Now(): "48h0m0s"} {
		r, err := view.At(ctx, entity, at)
		p, perr := r.Policy()
		if err != nil || perr != nil || p == nil || p.MinNotice().String() != want {
			t.Errorf("in force at %s: %+v %v %v, want minNotice %s", at, r, err, perr, want)
		}
	}
	if r := view.Current(domain.MustKey(other + "/resourceGroups/x/providers/p/c/c1")); r == nil || r.Key != domain.MustKey(other) {
		t.Errorf("the other scope's policy: %+v", r)
	}
	s, _ := env.JS.Stream(ctx, domain.PoliciesBucketStream)
	if info, err := s.Info(ctx, jetstream.WithSubjectFilter(domain.PoliciesPrefix+"*")); err != nil || len(info.State.Subjects) != 0 {
		t.Errorf("old keys left: %v (%v)", info.State.Subjects, err)
	}
	if rep, err := provision.Run(ctx, env.JS, provision.Config{}); err != nil || rep.Changed() {
		t.Errorf("provisioning again: %v\n%v", err, rep)
	}
}
