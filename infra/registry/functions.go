package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"maintsignals/functions/command"
	"maintsignals/functions/emitter"
	"maintsignals/functions/notices"
	"maintsignals/functions/policies"
	"maintsignals/functions/webhook"
	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/signing"
	"maintsignals/shared/store"
)

// roleFunction is the NATS role of the functions that write records, events and notices.
const roleFunction = "function"

func commandFunction() Function {
	return Function{
		Name:      "command",
		About:     "applies admin and outcome commands (every partition of MAINT_COMMANDS)",
		Role:      roleFunction,
		Drain:     function.DefaultDrainTimeout,
		Consumers: commandConsumers,
		Serves:    []Serve{{Stream: domain.CommandsStream, Consumer: "*", Prefix: domain.CommandConsumerPrefix, Pinned: true}},
		Access: Access{
			Publish: append([]string{domain.AllEventsFilter, domain.DLQPrefix + "*"}, RecordsSubjects...),
			// Its view of the policies: every revision the bucket keeps, followed live.
			Read: append([]string{domain.PoliciesBucketStream}, RecordsStreams...),
			// A redelivered command checks whether its outcome is already out (the last event of
			// its entity).
			Get: EventsStreams,
			// It finds the partition consumers that provisioning created.
			API: []string{"$JS.API.CONSUMER.NAMES." + domain.CommandsStream},
		},
		Flags: commandFlags,
	}
}

// commandConsumers are one consumer per command partition.
func commandConsumers(t Topology) []Consumer {
	out := make([]Consumer, 0, t.Partitions)
	for p := 0; p < t.Partitions; p++ {
		out = append(out, Consumer{Stream: domain.CommandsStream, ConsumerConfig: jetstream.ConsumerConfig{
			Durable:       domain.CommandConsumer(p),
			Description:   fmt.Sprintf("command function, partition %d", p),
			FilterSubject: domain.CommandFilter(p),
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			// One replica at a time serves a partition (it keeps the entities' order); another
			// takes over when it stops renewing its pin. The runtime fences a new pin until the
			// previous holder's commands are settled.
			PriorityPolicy: jetstream.PriorityPolicyPinned,
			PriorityGroups: []string{domain.CommandPriorityGroup},
			PinnedTTL:      domain.PinnedTTL(t.AckWait),
			MaxAckPending:  t.InFlight,
			AckWait:        t.AckWait,
			// Unlimited: the runtime, not the server, has the last word (it dead-letters at its
			// budget, function.DefaultMaxDeliver, and keeps trying while the dead letter itself
			// cannot be written), so the server never drops a command silently.
			MaxDeliver: -1,
			Replicas:   t.Replicas,
		}})
	}
	return out
}

func commandFlags(fs *pflag.FlagSet) Instance {
	var (
		cfg       command.Config
		idPattern string
	)
	fs.DurationVar(&cfg.MinNotice, "min-notice", 0, "refuse a Pending whose window starts sooner than this after the command is handled, unless forced (0: no minimum); a customer's policy may ask for more")
	authority := signingFlags(fs, &cfg.MaxCommandAge)
	fs.Float64Var(&cfg.EntityRate, "entity-rate", command.DefaultEntityRate, "changes per second admitted per entity, by the commands' stored times (a flood beyond is refused); negative: no limit")
	fs.IntVar(&cfg.EntityBurst, "entity-burst", command.DefaultEntityBurst, "burst of changes admitted per entity")
	fs.DurationVar(&cfg.ForgetAfter, "forget-after", store.DefaultForgetAfter, "how long the tombstone of a forgotten entity stays in the bucket (then it reads as never seen; its history stays in the events); negative: for ever")
	fs.StringVar(&idPattern, "resource-id-pattern", "", "refuse commands whose resource ID this regular expression (RE2) does not match, InvalidParameter on resourceId; Forget is exempt (default: any ID; ARM IDs: see the docs)")
	pattern := func() (*regexp.Regexp, error) {
		if idPattern == "" {
			return nil, nil
		}
		re, err := regexp.Compile(idPattern)
		if err != nil {
			return nil, fmt.Errorf("--resource-id-pattern: %w", err)
		}
		return re, nil
	}
	inst := authority.instance(func(ctx context.Context, env Env, auth *signing.Watched) error {
		re, err := pattern()
		if err != nil {
			return err
		}
		c := cfg
		c.Log, c.Meters, c.ResourceIDPattern = env.Log, env.Tel.MeterProvider(), re
		if auth != nil {
			c.Auth = auth
		}
		return command.Run(ctx, env.JS, c)
	})
	// A bad pattern fails the check before anything starts, as a bad signers file does.
	check := inst.Check
	inst.Check = func(ctx context.Context, log *slog.Logger) error {
		if _, err := pattern(); err != nil {
			return err
		}
		return check(ctx, log)
	}
	return inst
}

// signers is the signing policy of --signers and --require-signatures, which the command and
// policies functions share (one file: its admins, updaters and customers).
type signers struct {
	file     string
	required bool
}

// signingFlags adds the signing flags, maxAge's included, and returns what they set.
func signingFlags(fs *pflag.FlagSet, maxAge *time.Duration) *signers {
	s := &signers{}
	fs.StringVar(&s.file, "signers", "", `JSON file of the keys allowed to sign commands, read again when it changes: [{"name":"alice", "publicKeys":["U…"], "roles":["admin"]}] (roles: admin, updater, customer with "scopes", campaign)`)
	fs.BoolVar(&s.required, "require-signatures", false, "refuse unsigned commands (Unauthorized); needs --signers")
	fs.DurationVar(maxAge, "max-command-age", command.DefaultMaxCommandAge, "a signed command issued longer before the stream stored it is refused (Unauthorized, expired)")
	return s
}

// load reads the signers file (nil: none) and follows it until ctx ends, so that keys rotate
// without a restart.
func (s *signers) load(ctx context.Context, log *slog.Logger) (*signing.Watched, error) {
	switch {
	case s.file == "" && s.required:
		return nil, errors.New("--require-signatures needs --signers FILE")
	case s.file == "":
		return nil, nil
	}
	return signing.Watch(ctx, s.file, s.required, signing.DefaultWatchEvery, log)
}

// instance checks the signers file before anything starts and runs run with its policy (nil:
// none; a nil *signing.Watched must not become a non-nil interface).
func (s *signers) instance(run func(ctx context.Context, env Env, auth *signing.Watched) error) Instance {
	return Instance{
		Check: func(ctx context.Context, log *slog.Logger) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := s.load(ctx, log)
			return err
		},
		Run: func(ctx context.Context, env Env) error {
			auth, err := s.load(ctx, env.Log)
			if err != nil {
				return err
			}
			return run(ctx, env, auth)
		},
	}
}

func policiesFunction() Function {
	return Function{
		Name:      "policies",
		About:     "applies policy commands: customers' maintenance policies set and deleted (MAINT_POLICIES)",
		Role:      roleFunction,
		Drain:     function.DefaultDrainTimeout,
		Consumers: policiesConsumers,
		Serves:    []Serve{{Stream: domain.PoliciesStream, Consumer: domain.PoliciesConsumer, Pinned: true}},
		Access: Access{
			// It writes the revisions (a compare-and-swap on the subject's last sequence) and
			// publishes the outcomes and dead letters.
			Publish: []string{domain.PolicyEventPrefix + "*", domain.DLQPrefix + "*", domain.PoliciesFilter},
			// It reads a scope's last revision with its header, and a redelivered command the
			// last outcome of its scope.
			Get: []string{domain.PoliciesBucketStream, domain.EventsStream},
		},
		Flags: policiesFlags,
	}
}

// policiesConsumers is the policies function's one consumer: pinned to one replica at a time,
// scopes in stream order, as a command partition.
func policiesConsumers(t Topology) []Consumer {
	return pinnedCommandConsumer(t, domain.PoliciesStream, domain.PoliciesConsumer, domain.PoliciesPriorityGroup,
		domain.PolicyPrefix+"*", "policies function: policy commands, by scope in stream order")
}

// pinnedCommandConsumer is the one consumer of a function that applies commands to a bucket
// (policies, subscriptions): pinned to one replica at a time so that each key's commands are
// applied in stream order, as a command partition's.
func pinnedCommandConsumer(t Topology, stream, durable, group, filter, description string) []Consumer {
	return []Consumer{{Stream: stream, ConsumerConfig: jetstream.ConsumerConfig{
		Durable:        durable,
		Description:    description,
		FilterSubject:  filter,
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{group},
		PinnedTTL:      domain.PinnedTTL(t.AckWait),
		MaxAckPending:  t.InFlight,
		AckWait:        t.AckWait,
		MaxDeliver:     -1, // the runtime dead-letters at its budget, as for commands
		Replicas:       t.Replicas,
	}}}
}

func policiesFlags(fs *pflag.FlagSet) Instance {
	return applierFlags(fs, func(w *signing.Watched) policies.Authority { return w }, policies.Run)
}

// applierFlags are the flags of a function that applies signed commands to a bucket (policies,
// subscriptions), and how it runs with them. asAuth gives the signers as the function's
// Authority, only when there are some: without, Auth stays a nil interface.
func applierFlags[A any](fs *pflag.FlagSet, asAuth func(*signing.Watched) A, run func(context.Context, jetstream.JetStream, function.ApplierConfig[A]) error) Instance {
	var cfg function.ApplierConfig[A]
	authority := signingFlags(fs, &cfg.MaxCommandAge)
	return authority.instance(func(ctx context.Context, env Env, auth *signing.Watched) error {
		c := cfg
		c.Log, c.Meters = env.Log, env.Tel.MeterProvider()
		if auth != nil {
			c.Auth = asAuth(auth)
		}
		return run(ctx, env.JS, c)
	})
}

func emitterFunction() Function {
	return Function{
		Name:      "emitter",
		About:     "re-exports every tracked state as OTLP metrics on each tick",
		Role:      roleFunction,
		Tick:      true,
		Drain:     emitter.DefaultExportTimeout + 5*time.Second,
		Consumers: shardConsumers(domain.EmitterShardConsumer, "emitter function"),
		Serves:    []Serve{{Stream: domain.ScheduleStream, Consumer: "*", Prefix: domain.EmitterShardPrefix, Pinned: true}},
		// It scans the bucket and follows the policies (cluster.maintenance.conflicts); a lone
		// replica reads the tick interval from the schedule; it finds the shard consumers that
		// provisioning created; it reports the size of every stream (cluster.maintenance.stream.*);
		// it rewrites its cells' oldest records when their interior deletes pass their records
		// (store.Compact).
		// In a region, it publishes the region's summary each tick.
		Access: Access{Publish: append([]string{domain.SummarySubjects}, RecordsSubjects...), Read: append([]string{domain.PoliciesBucketStream}, RecordsStreams...), Get: []string{domain.ScheduleStream},
			API: append([]string{scheduleConsumerNames}, streamInfos()...)},
		Flags: emitterFlags,
	}
}

func emitterFlags(fs *pflag.FlagSet) Instance {
	var cfg emitter.Config
	fs.DurationVar(&cfg.Retention, "retention", emitter.DefaultRetention, "how long an entity in None keeps being emitted")
	fs.BoolVar(&cfg.PUCM, "pucm", false, "also emit the ARO-RP compatible cluster.maintenance.pucm metric")
	fs.StringVar(&cfg.Region, "region", "", "the region this deployment is (README, Regions): each tick's counts are then published as the region's summary, which the hub sources")
	stuckAfterFlag(fs, &cfg.StuckAfter)
	fs.BoolVar(&cfg.PlantLeak, "test-plant-leak", false, "test switch: leak one goroutine per tick (test/soak -plant-leak)")
	_ = fs.MarkHidden("test-plant-leak")
	return Instance{Run: func(ctx context.Context, env Env) error {
		c := cfg
		c.Tick, c.Logger = env.Tick, env.Log
		return emitter.Run(ctx, env.JS, env.Tel, c)
	}}
}

// stuckAfterFlag is the stuck limit, which the emitter (cluster.maintenance.stuck) and the
// notices function (the stuck notice) share: `up` gives both the one value.
func stuckAfterFlag(fs *pflag.FlagSet, v *time.Duration) {
	fs.DurationVar(v, "stuck-after", domain.DefaultStuckAfter, "an update running longer than this is stuck (cluster.maintenance.stuck, the stuck notice)")
}

func noticesFunction() Function {
	return Function{
		Name:      "notices",
		About:     "publishes lifecycle notices (reminders, due, overdue, stuck) and policy conflicts on each tick",
		Role:      roleFunction,
		Tick:      true,
		Drain:     notices.DefaultRunTimeout + 5*time.Second,
		Consumers: shardConsumers(domain.NoticesShardConsumer, "notices function"),
		Serves:    []Serve{{Stream: domain.ScheduleStream, Consumer: "*", Prefix: domain.NoticesShardPrefix, Pinned: true}},
		// It scans the bucket, follows the policies (the conflict notices) and reads the last
		// notice of an entity; it finds its shard consumers.
		Access: Access{Publish: []string{domain.AllNoticesFilter}, Read: append([]string{domain.PoliciesBucketStream}, RecordsStreams...), Get: append([]string{domain.ScheduleStream}, NoticesStreams...),
			API: []string{scheduleConsumerNames}},
		Flags: noticesFlags,
	}
}

func noticesFlags(fs *pflag.FlagSet) Instance {
	var cfg notices.Config
	remind := fs.String("remind", notices.FormatLadder(notices.DefaultRemind), `reminder lead times before a window starts, comma-separated ("" for none)`)
	stuckAfterFlag(fs, &cfg.StuckAfter)
	ladder := func() ([]time.Duration, error) {
		l, err := notices.ParseLadder(*remind)
		if err != nil {
			return nil, fmt.Errorf("--remind: %w", err)
		}
		return l, nil
	}
	return Instance{
		Check: func(context.Context, *slog.Logger) error { _, err := ladder(); return err },
		Run: func(ctx context.Context, env Env) error {
			l, err := ladder()
			if err != nil {
				return err
			}
			c := cfg
			c.Remind, c.Tick, c.Logger, c.Meters = l, env.Tick, env.Log, env.Tel.MeterProvider()
			err = notices.Run(ctx, env.JS, c)
			if errors.Is(err, notices.ErrInvalidConfig) {
				return fmt.Errorf("--remind, --stuck-after: %w", err)
			}
			return err
		},
	}
}

// scheduleConsumerNames lists the consumers of the schedule stream.
const scheduleConsumerNames = "$JS.API.CONSUMER.NAMES." + domain.ScheduleStream

// streamInfos are the info requests of every stream of the product: their state, no message.
func streamInfos() []string {
	var out []string
	for _, s := range domain.Streams() {
		out = append(out, "$JS.API.STREAM.INFO."+s)
	}
	return out
}

// shardConsumers are a tick function's consumers of the ticks, one per shard (named by name):
// the ticks stay in the stream (limits retention), and each consumer hands every tick to the
// one replica it is pinned to, which serves that shard of the tick.
func shardConsumers(name func(int) string, desc string) func(Topology) []Consumer {
	return func(t Topology) []Consumer {
		n := max(t.Shards, 1)
		out := make([]Consumer, 0, n)
		for s := range n {
			out = append(out, tickConsumer(t, name(s), domain.Shard{Index: s, Of: n}, fmt.Sprintf("%s, shard %d of %d", desc, s, n)))
		}
		return out
	}
}

// tickConsumer is a function's consumer of one shard of the ticks.
func tickConsumer(t Topology, name string, shard domain.Shard, desc string) Consumer {
	ackWait := TickAckWait(t.Tick)
	return Consumer{Stream: domain.ScheduleStream, ConsumerConfig: jetstream.ConsumerConfig{
		Durable:       name,
		Description:   desc,
		FilterSubject: domain.TickSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		MaxAckPending: 1,
		// A replica that dies holding a tick blocks the next one until the ack wait runs
		// out: keep it under half a tick (the runtime signals progress while a run is long).
		AckWait:    ackWait,
		MaxDeliver: 3,
		// One replica at a time serves a shard; when it stops renewing its pin (it died), the
		// pin moves within the pinned TTL, which is shorter than any tick over 3 s, so the
		// next tick of the shard goes to a live replica.
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{domain.TickPriorityGroup},
		PinnedTTL:      domain.PinnedTTL(ackWait),
		Metadata:       domain.ShardMetadata(shard),
		Replicas:       t.Replicas,
	}}
}

// TickAckWait is a tick consumer's ack wait for a tick interval: half the tick, between 500 ms
// and 30 s.
func TickAckWait(tick time.Duration) time.Duration {
	return min(max(tick/2, 500*time.Millisecond), 30*time.Second)
}

func webhookFunction() Function {
	return Function{
		Name:  "webhook",
		About: "delivers events and notices to the --subscriptions endpoints and the self-service subscriptions (signed CloudEvents)",
		Role:  roleFunction,
		Drain: webhook.DefaultTimeout + 5*time.Second,
		// One consumer per subscription on the webhook feed, made by the function from its
		// subscriptions file and from the subscriptions bucket; no other role may reach that
		// stream but an admin's replays.
		Serves: []Serve{{Stream: domain.WebhookStream, Consumer: "*", Prefix: domain.WebhookConsumerPrefix, Pinned: true, Creates: true}},
		// A delivery that fails for good is a dead letter of its subscription.
		Access: webhookAccess(),
		Flags:  webhookFlags,
	}
}

// webhookAccess is what the webhook function does besides serving its consumers: dead-letter a
// delivery; and for the self-service subscriptions, follow their bucket, read their secrets,
// find where a new one starts (the feed's and its sources' first messages after its creation)
// and remove a deleted one's consumer.
func webhookAccess() Access {
	return Access{
		Publish: []string{domain.DLQPrefix + "*"},
		Read:    []string{domain.SubscriptionsBucketStream},
		Get:     slices.Concat([]string{domain.SubscriptionSecretsStream, domain.WebhookStream, domain.EventsStream}, EventsStreams, NoticesStreams),
		API: []string{"$JS.API.CONSUMER.NAMES." + domain.WebhookStream,
			"$JS.API.CONSUMER.DELETE." + domain.WebhookStream + ".*"},
	}
}

func webhookFlags(fs *pflag.FlagSet) Instance {
	var (
		cfg           webhook.Config
		subscriptions string
	)
	fs.StringVar(&subscriptions, "subscriptions", "", `JSON file of the subscriptions: [{"name", "url", "secret":"whsec_…", "types":[…], "states":[…], "resourcePrefix", "caFile"}]`)
	fs.BoolVar(&cfg.FromStart, "from-start", false, "a subscription of the file seen for the first time starts at the oldest event the webhook feed keeps, since webhooks were turned on (default: at events stored after it is created); one with progress keeps it")
	fs.BoolVar(&cfg.SelfService, "self-service", true, "also deliver to the self-service subscriptions (maintctl subscription create), started and stopped within seconds of their commands (needs the webhook feed: provision --webhooks)")
	fs.BoolVar(&cfg.AllowPrivateEndpoints, "allow-private-endpoints", false, "let self-service subscriptions reach loopback, private, link-local and shared addresses (default: refused, so that a customer cannot make the function post into this network)")
	return Instance{
		Idle: func() bool { return subscriptions == "" && !cfg.SelfService },
		Run: func(ctx context.Context, env Env) error {
			if subscriptions == "" && !cfg.SelfService {
				if !env.Up {
					return errors.New("the webhook function needs --subscriptions FILE, or --self-service")
				}
				<-ctx.Done() // up without subscriptions: nothing to deliver
				return nil
			}
			c := cfg
			if subscriptions != "" {
				subs, err := webhook.LoadFile(subscriptions)
				if err != nil {
					return err
				}
				c.Subscriptions = subs
			}
			c.Log, c.Meters = env.Log, env.Tel.MeterProvider()
			return webhook.Run(ctx, env.JS, c)
		},
	}
}
