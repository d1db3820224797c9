package provision_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/functions/webhook"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

func TestRun_SecondRunChangesNothing(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	rep, err := provision.Run(ctx, env.JS, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() {
		t.Fatalf("second run changed something:\n%v", rep)
	}
	for _, c := range rep {
		if c.Action != provision.Unchanged {
			t.Errorf("%v", c)
		}
	}
}

func TestRun_CreatesEveryResourceOfTheContract(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	for _, name := range []string{domain.CommandsStream, domain.EventsStream, domain.DLQStream, domain.ScheduleStream, domain.Cell(0).RecordsStream(), domain.Cell(7).RecordsStream()} {
		if _, err := env.JS.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	for p := 0; p < env.Config.Partitions; p++ {
		if _, err := env.JS.Consumer(ctx, domain.CommandsStream, domain.CommandConsumer(p)); err != nil {
			t.Errorf("consumer %d: %v", p, err)
		}
	}
	for s := 0; s < domain.DefaultShards; s++ {
		for _, name := range []string{domain.EmitterShardConsumer(s), domain.NoticesShardConsumer(s)} {
			c, err := env.JS.Consumer(ctx, domain.ScheduleStream, name)
			if err != nil {
				t.Errorf("shard consumer %s: %v", name, err)
				continue
			}
			cfg := c.CachedInfo().Config
			got, err := domain.ShardFromMetadata(name, cfg.Metadata)
			if err != nil || got != (domain.Shard{Index: s, Of: domain.DefaultShards}) {
				t.Errorf("%s: shard %v (%v), want %d of %d", name, got, err, s, domain.DefaultShards)
			}
			if cfg.PriorityPolicy != jetstream.PriorityPolicyPinned || cfg.PinnedTTL >= env.Config.Tick || cfg.MaxAckPending != 1 {
				t.Errorf("%s: policy %v, pinned TTL %s, max ack pending %d; want pinned to one replica, handed over within a tick, one tick at a time",
					name, cfg.PriorityPolicy, cfg.PinnedTTL, cfg.MaxAckPending)
			}
		}
	}
	// Direct gets: what a user confined to a tenant may send.
	for _, c := range domain.AllCells() {
		kv, err := env.JS.Stream(ctx, c.RecordsStream())
		if err != nil || !kv.CachedInfo().Config.AllowDirect || kv.CachedInfo().Config.Metadata[domain.MetaLayout] != "2" {
			t.Errorf("bucket %s: %v, direct gets %v, metadata %v", c.RecordsBucket(), err, err == nil && kv.CachedInfo().Config.AllowDirect, err == nil && kv.CachedInfo().Config.Metadata != nil)
		}
	}
}

func TestRun_CommandsArePartitionedByKey(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Partitions = 4 }))
	ctx := context.Background()
	key := domain.MustKey("/subscriptions/x/resourceGroups/rg/providers/p/c1")
	for i := 0; i < 3; i++ {
		if _, err := env.JS.Publish(ctx, domain.CommandSubject(key), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := env.JS.Stream(ctx, domain.CommandsStream)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 {
		t.Fatalf("want one stored subject, got %v", info.State.Subjects)
	}
	for subj, n := range info.State.Subjects {
		parts := strings.Split(subj, ".")
		if len(parts) != 4 || parts[3] != key || n != 3 {
			t.Fatalf("stored subject %q x%d, want maint.cmd.<p>.%s x3", subj, n, key)
		}
	}
}

func TestRun_ChangingTheTickReplacesTheSchedule(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cfg := env.Config
	cfg.Tick = 2 * time.Second
	rep, err := provision.Run(ctx, env.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range rep {
		if c.Kind == "schedule" {
			found = true
			if c.Action != provision.Updated {
				t.Fatalf("schedule: %v", c)
			}
		}
	}
	if !found {
		t.Fatal("no schedule in report")
	}
	s, _ := env.JS.Stream(ctx, domain.ScheduleStream)
	m, err := s.GetLastMsgForSubject(ctx, domain.ScheduleSubject)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(jetstream.ScheduleHeader); got != "@every 2s" {
		t.Fatalf("schedule header %q", got)
	}
	// NATS, not a ticker of ours, produces the ticks.
	c, err := env.JS.OrderedConsumer(ctx, domain.ScheduleStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{domain.TickSubject}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Next(jetstream.FetchMaxWait(6 * time.Second))
	if err != nil {
		t.Fatalf("no tick within 6s: %v", err)
	}
	if msg.Headers().Get(jetstream.SchedulerHeader) == "" {
		t.Fatalf("tick without %s header: %v", jetstream.SchedulerHeader, msg.Headers())
	}
}

func TestRun_ReportsWhatNATSCannotChange(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cfg := env.Config
	cfg.Storage = jetstream.MemoryStorage
	rep, err := provision.Run(ctx, env.JS, cfg)
	if err == nil {
		t.Fatal("changing storage succeeded; want a clear failure")
	}
	if !strings.Contains(err.Error(), "storage") {
		t.Fatalf("error does not name the setting: %v", err)
	}
	if len(rep) == 0 {
		t.Fatal("empty report")
	}
}

func TestWithDefaults_RejectsBadSettings(t *testing.T) {
	for name, c := range map[string]provision.Config{
		"two replicas":    {Replicas: 2},
		"sub-second tick": {Tick: 500 * time.Millisecond},
		"zero partitions": {Partitions: -1},
		"no shards":       {Shards: -1},
		"too many shards": {Shards: domain.MaxShards + 1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.WithDefaults(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestRun_RefusesAnotherPartitionCount(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Partitions = 4 }))
	cfg := env.Config
	cfg.Partitions = 8
	_, err := provision.Run(context.Background(), env.JS, cfg)
	if !errors.Is(err, provision.ErrInvalidConfig) || !strings.Contains(err.Error(), "partition count") {
		t.Fatalf("err = %v, want a refusal naming the partition count", err)
	}
	if _, err := env.JS.Consumer(context.Background(), domain.CommandsStream, domain.CommandConsumer(7)); err == nil {
		t.Fatal("consumers for the new partitions were created anyway")
	}
}

// The webhook feed copies every event (one more write each), so it exists only where asked
// for; once there, provisioning without the flag leaves it alone, and a webhook function
// without it refuses to start, saying how to make it.
func TestRun_WebhookFeedOnlyWhenAsked(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Webhooks = false }))
	ctx := testenv.Context(t, time.Minute)
	if _, err := env.JS.Stream(ctx, domain.WebhookStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("provisioned without webhooks: stream %s: %v, want not found", domain.WebhookStream, err)
	}
	_, err := webhook.New(ctx, env.JS, webhook.Config{Subscriptions: []webhook.Subscription{mustSubscription(t)}})
	if err == nil || !strings.Contains(err.Error(), "provision --webhooks") {
		t.Fatalf("webhook function without its feed: %v, want advice to provision --webhooks", err)
	}

	cfg := env.Config
	cfg.Webhooks = true
	if _, err := provision.Run(ctx, env.JS, cfg); err != nil {
		t.Fatal(err)
	}
	feed, err := env.JS.Stream(ctx, domain.WebhookStream)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, s := range feed.CachedInfo().Config.Sources {
		sources = append(sources, s.Name)
	}
	for _, want := range slices.Concat([]string{domain.EventsStream}, domain.EventsStreams(), domain.NoticesStreams()) {
		if !slices.Contains(sources, want) {
			t.Errorf("the feed sources %v, want the events and the notices of every cell (%s missing)", sources, want)
		}
	}

	cfg.Webhooks = false
	rep, err := provision.Run(ctx, env.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() {
		t.Errorf("provisioning again without --webhooks changed something:\n%v", rep)
	}
	if _, err := env.JS.Stream(ctx, domain.WebhookStream); err != nil {
		t.Errorf("provisioning without --webhooks removed the feed: %v", err)
	}
}

func mustSubscription(t *testing.T) webhook.Subscription {
	t.Helper()
	subs, err := webhook.Parse([]byte(`[{"name":"crm","url":"http://127.0.0.1:1/hook","secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]`))
	if err != nil {
		t.Fatal(err)
	}
	return subs[0]
}

// TestRun_CreatesEveryFunctionsConsumers: each consumer of each function in the registry
// exists once provisioned, on a stream provisioning makes (the webhook feed with Webhooks).
func TestRun_CreatesEveryFunctionsConsumers(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	streams := map[string]bool{}
	for _, s := range provision.Streams(mustDefaults(t, env.Config)) {
		streams[s.Name] = true
	}
	for _, f := range registry.Functions() {
		for _, s := range f.Streams() {
			if !streams[s] {
				t.Errorf("function %s reads stream %s, which provisioning does not make", f.Name, s)
			}
		}
		if f.Consumers == nil {
			continue
		}
		for _, c := range f.Consumers(mustDefaults(t, env.Config).Topology()) {
			if _, err := env.JS.Consumer(ctx, c.Stream, c.Durable); err != nil {
				t.Errorf("function %s: consumer %s/%s: %v", f.Name, c.Stream, c.Durable, err)
			}
		}
	}
}

func mustDefaults(t *testing.T, c provision.Config) provision.Config {
	t.Helper()
	c, err := c.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The feed created on existing data copies what is stored from then on, not the history (no
// subscription starts before the feed); provisioning it again keeps where its sources began.
func TestRun_WebhookFeedOnExistingDataCopiesFromItsCreation(t *testing.T) {
	env := testenv.Start(t, testenv.WithProvision(func(c *provision.Config) { c.Webhooks = false }))
	ctx := testenv.Context(t, time.Minute)
	publish := func(subject, id string) {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{}`)
		m.Header.Set(domain.HeaderMsgID, id)
		if _, err := env.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		publish(domain.EventSubject(fmt.Sprintf("k%d", i)), fmt.Sprintf("old-%d", i))
		publish(domain.NoticeSubject(fmt.Sprintf("k%d", i)), fmt.Sprintf("old-n-%d", i))
	}
	cfg := env.Config
	cfg.Webhooks = true
	if _, err := provision.Run(ctx, env.JS, cfg); err != nil {
		t.Fatal(err)
	}
	publish(domain.EventSubject("k1"), "new-1")
	publish(domain.NoticeSubject("k1"), "new-n-1")
	var feed jetstream.Stream
	testenv.Eventually(t, 10*time.Second, "the new event and notice in the feed", func() bool {
		var err error
		feed, err = env.JS.Stream(ctx, domain.WebhookStream)
		return err == nil && feed.CachedInfo().State.Msgs >= 2
	})
	time.Sleep(200 * time.Millisecond) // anything of the history would have come first
	if feed, _ = env.JS.Stream(ctx, domain.WebhookStream); feed.CachedInfo().State.Msgs != 2 {
		t.Fatalf("the feed holds %d messages, want only the 2 stored after it was created", feed.CachedInfo().State.Msgs)
	}
	starts := map[string]uint64{}
	for _, s := range feed.CachedInfo().Config.Sources {
		starts[s.Name] = s.OptStartSeq
	}
	// Each source starts after what its cell held: the 50 old ones spread over the cells.
	held := map[domain.Cell]uint64{}
	for i := range 50 {
		held[domain.CellOf(fmt.Sprintf("k%d", i))]++
	}
	for _, c := range domain.AllCells() {
		if starts[c.EventsStream()] != held[c]+1 || starts[c.NoticesStream()] != held[c]+1 {
			t.Errorf("cell %d: sources start at %d and %d, want %d (after the %d stored)", c, starts[c.EventsStream()], starts[c.NoticesStream()], held[c]+1, held[c])
		}
	}
	rep, err := provision.Run(ctx, env.JS, cfg)
	if err != nil || rep.Changed() {
		t.Fatalf("provisioning again: %v\n%v", err, rep)
	}
	// An update of the feed (its retention follows the dead letters') leaves its sources be.
	cfg.DLQMaxAge = 10 * 24 * time.Hour
	if _, err := provision.Run(ctx, env.JS, cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	feed, _ = env.JS.Stream(ctx, domain.WebhookStream)
	for _, s := range feed.CachedInfo().Config.Sources {
		if s.OptStartSeq != starts[s.Name] {
			t.Errorf("after an update, source %s starts at %d, want %d as before", s.Name, s.OptStartSeq, starts[s.Name])
		}
	}
	if n := feed.CachedInfo().State.Msgs; n != 2 || feed.CachedInfo().Config.MaxAge != cfg.DLQMaxAge {
		t.Errorf("after an update the feed holds %d messages (max age %s), want 2 (%s)", n, feed.CachedInfo().Config.MaxAge, cfg.DLQMaxAge)
	}
}
