package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/function"
	"maintsignals/shared/policy"
	"maintsignals/shared/subscription"
)

// Self-service subscriptions (README, Tenants). Every replica follows the subscriptions bucket
// (an ordered consumer, the last revision of each name, then every change as it is stored) and
// runs, for each subscription in it, a runtime of its own on the subscription's consumer of
// the feed, webhook-<delivery name>, pinned as the file subscriptions' are: with several
// replicas each consumer delivers through one of them at a time, and each event once.
//
// The consumer starts where the subscription began, the create command's stored time
// (startAt), whichever replica creates it and however late: the same place every time. A
// delete stops the runtime within moments (what it holds is settled unsent) and removes the
// consumer; a subscription created again under the name has another delivery name, so another
// consumer. Consumers of subscriptions deleted while no replica ran are removed once a replica
// has read the bucket.

// readinessName is what the self-service deliveries report to the readiness probe, once the
// bucket is read.
const readinessName = "webhook-self-service"

// Metadata of a self-service subscription's consumer: its located name, for the sweep.
const subscriptionMeta = "maintsignals.subscription"

// selfService follows the bucket and runs the deliveries of one replica.
type selfService struct {
	js      jetstream.JetStream
	cfg     Config
	feed    jetstream.Stream
	bucket  jetstream.Stream
	secrets jetstream.Stream
	log     *slog.Logger

	running map[string]*running // by located name; only the follow loop touches it
	synced  bool                // the bucket as it was at the start is applied
	wg      sync.WaitGroup      // the runs and the stops under way
}

// running is one subscription being delivered.
type running struct {
	rec    subscription.Record
	cancel context.CancelFunc // ends its runtime (it drains)
	gone   context.CancelFunc // marks it deleted: nothing more is sent
	done   chan struct{}
}

func newSelfService(ctx context.Context, js jetstream.JetStream, cfg Config) (*selfService, error) {
	m := &selfService{js: js, cfg: cfg, log: cfg.Log.With("function", "webhook"), running: map[string]*running{}}
	for _, s := range []struct {
		name string
		dst  *jetstream.Stream
	}{{domain.WebhookStream, &m.feed}, {domain.SubscriptionsBucketStream, &m.bucket}, {domain.SubscriptionSecretsStream, &m.secrets}} {
		st, err := js.Stream(ctx, s.name)
		if err != nil {
			return nil, fmt.Errorf("webhook function, self-service subscriptions: stream %s: %w (run `maintctl provision --webhooks`)", s.name, err)
		}
		*s.dst = st
	}
	return m, nil
}

// run follows the bucket until ctx ends, then stops every delivery and waits for them.
func (m *selfService) run(ctx context.Context) error {
	cons, err := m.js.OrderedConsumer(ctx, domain.SubscriptionsBucketStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.SubscriptionSubject(">")},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return function.Starting(ctx, fmt.Errorf("webhook function: follow %s: %w", domain.SubscriptionsBucket, err))
	}
	it, err := cons.Messages()
	if err != nil {
		return function.Starting(ctx, fmt.Errorf("webhook function: follow %s: %w", domain.SubscriptionsBucket, err))
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		m.caughtUp(ctx)
	}
	err = m.follow(ctx, it)
	function.ReportServing(ctx, readinessName, false, true)
	for key, r := range m.running {
		m.stop(r, false)
		delete(m.running, key)
	}
	m.wg.Wait()
	m.log.Info("self-service subscriptions stopped")
	return err
}

// follow applies the bucket's revisions in order until the iterator stops.
func (m *selfService) follow(ctx context.Context, it jetstream.MessagesContext) error {
	for {
		msg, err := it.Next()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("webhook function: follow %s: %w", domain.SubscriptionsBucket, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		s, err := subscription.FromMsg(msg.Subject(), md.Sequence.Stream, md.Timestamp, msg.Headers(), msg.Data())
		if err != nil {
			m.log.Error("a subscription's revision does not read; keeping what runs", "key", s.Key, "err", err)
		} else {
			m.apply(ctx, s)
		}
		if md.NumPending == 0 {
			m.caughtUp(ctx)
		}
	}
}

// caughtUp runs once the bucket as it was at the start is applied: the replica is ready, and
// the consumers of subscriptions deleted meanwhile go.
func (m *selfService) caughtUp(ctx context.Context) {
	if m.synced {
		return
	}
	m.synced = true
	function.ReportServing(ctx, readinessName, true, false)
	m.log.Info("self-service subscriptions followed", "subscriptions", len(m.running))
	m.sweep(ctx)
}

// apply starts, restarts or stops the delivery of one name as its revision says.
func (m *selfService) apply(ctx context.Context, s subscription.Stored) {
	cur := m.running[s.Key]
	if cur != nil && !s.Deleted && cur.rec.Delivery == s.Record.Delivery {
		return // the same subscription
	}
	if cur != nil {
		m.stop(cur, true)
		delete(m.running, s.Key)
	}
	if !s.Deleted {
		m.running[s.Key] = m.start(ctx, s.Key, s.Record)
	}
}

// start runs the delivery of rec until it is stopped.
func (m *selfService) start(ctx context.Context, key string, rec subscription.Record) *running {
	rctx, cancel := context.WithCancel(ctx)
	gone, goneCancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{rec: rec, cancel: cancel, gone: goneCancel, done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		m.serve(rctx, gone, key, rec)
	}()
	return r
}

// stop ends a delivery; with deleted, what it holds is settled unsent and its consumer goes.
// It returns at once: the drain and the removal run on their own.
func (m *selfService) stop(r *running, deleted bool) {
	if deleted {
		r.gone()
	}
	r.cancel()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-r.done
		if !deleted {
			return
		}
		name := domain.WebhookConsumer(r.rec.Delivery)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.js.DeleteConsumer(ctx, domain.WebhookStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			m.log.Warn("self-service subscription deleted; its consumer could not be removed (the next start removes it)", "consumer", name, "err", err)
			return
		}
		m.log.Info("self-service subscription deleted: deliveries stopped", "subscription", r.rec.Delivery)
	}()
}

// serve delivers rec until ctx ends, starting again (after a pause) when it cannot start:
// its secret or its consumer cannot be read yet.
func (m *selfService) serve(ctx, gone context.Context, key string, rec subscription.Record) {
	for pause := time.Second; ; pause = min(2*pause, 30*time.Second) {
		err := m.serveOnce(ctx, gone, key, rec)
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("self-service subscription not delivering; trying again", "subscription", rec.Delivery, "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// serveOnce reads rec's secret, ensures its consumer and runs its runtime until ctx ends.
func (m *selfService) serveOnce(ctx, gone context.Context, key string, rec subscription.Record) error {
	secret, err := m.secret(ctx, key, rec)
	if err != nil {
		return err
	}
	sub, err := fromRecord(rec, secret, m.cfg.Roots, m.cfg.AllowPrivateEndpoints)
	if err != nil {
		return err
	}
	st, err := m.ensure(ctx, key, rec)
	if err != nil {
		return err
	}
	s := &subscriber{sub: sub, snd: newSender(sub, m.cfg.Timeout), start: st, gone: gone,
		log: m.cfg.Log.With("function", "webhook", "subscription", sub.Name)}
	m.log.Info("self-service subscription delivering", "subscription", sub.Name, "scope", rec.Scope, "endpoint", redactURL(rec.URL),
		"types", rec.Types, "states", rec.States, "created", rec.CreatedAt)
	rc := runtimeConfig(m.cfg, "webhook", []string{domain.WebhookConsumer(sub.Name)}, s.deliver, func(string) string { return sub.Name })
	return function.Run(function.WithoutStatus(ctx), m.js, rc)
}

// secret reads rec's signing secret: the one its create command wrote.
func (m *selfService) secret(ctx context.Context, key string, rec subscription.Record) (string, error) {
	msg, err := m.secrets.GetLastMsgForSubject(ctx, domain.SubscriptionSecretSubject(key))
	if err != nil {
		return "", fmt.Errorf("the secret of %s: %w", rec.Delivery, err)
	}
	if got := msg.Header.Get(domain.HeaderSubscriptionCommand); got != rec.CommandID || msg.Header.Get(domain.HeaderKVOperation) != "" {
		return "", fmt.Errorf("the secret of %s is not its create command's (%q)", rec.Delivery, got)
	}
	return string(msg.Data), nil
}

// ensure creates rec's consumer, starting where the subscription began, or takes the one
// another replica (or an earlier run) created; it returns where the subscription starts.
func (m *selfService) ensure(ctx context.Context, key string, rec subscription.Record) (start, error) {
	want := consumerConfig(m.cfg, rec.Delivery)
	filters, err := tenantFilters(rec)
	if err != nil {
		return nil, err
	}
	want.FilterSubjects = filters
	c, err := m.js.Consumer(ctx, domain.WebhookStream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		first, st, err := startAt(ctx, m.js, m.feed, rec.CreatedAt)
		if err != nil {
			return nil, err
		}
		want.DeliverPolicy, want.OptStartSeq, want.Metadata = jetstream.DeliverByStartSequencePolicy, first, st.metadata()
		want.Metadata[subscriptionMeta] = key
		want.Description = "webhook function, self-service subscription " + rec.Name + " of " + rec.Scope
		c, err = m.js.CreateConsumer(ctx, domain.WebhookStream, want)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			c, err = m.js.Consumer(ctx, domain.WebhookStream, want.Durable)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s/%s: %w", domain.WebhookStream, want.Durable, err)
	}
	return startOf(c.CachedInfo().Config.Metadata), nil
}

// tenantFilters are what a self-service subscription's consumer reads of the feed: the events
// and notices of its scope's tenant, which the server picks by the tenant tokens of their
// subjects (the function never reads another tenant's for it), and its own replays; the
// handler then keeps those of its scope.
func tenantFilters(rec subscription.Record) ([]string, error) {
	sc, err := subscription.ParseScope(rec.Scope)
	if err != nil {
		return nil, err
	}
	t := domain.TenantOf(sc.Key)
	tokens := t.Subscription + "." + t.Group + ".*"
	if sc.Level == policy.LevelSubscription {
		tokens = t.Subscription + ".*.*" // every resource group of it, and what lies in none
	}
	return []string{domain.EventPrefix + "*." + tokens, domain.NoticePrefix + "*." + tokens, domain.WebhookReplaySubject(rec.Delivery, "*")}, nil
}

// sweep removes the consumers of self-service subscriptions that the bucket no longer has
// (deleted while no replica ran, or left by a failed removal), asking the bucket, not this
// replica's view, about each.
func (m *selfService) sweep(ctx context.Context) {
	names := m.feed.ConsumerNames(ctx)
	var stale []string
	for name := range names.Name() {
		delivery, ok := strings.CutPrefix(name, domain.WebhookConsumerPrefix)
		if ok && strings.Contains(delivery, domain.SubscriptionDeliverySeparator) && !m.inBucket(ctx, name, delivery) {
			stale = append(stale, name)
		}
	}
	if err := names.Err(); err != nil {
		m.log.Warn("self-service subscriptions: could not list the feed's consumers", "err", err)
	}
	for _, name := range stale {
		if err := m.feed.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			m.log.Warn("self-service subscriptions: a deleted subscription's consumer could not be removed", "consumer", name, "err", err)
			continue
		}
		m.log.Info("self-service subscriptions: removed the consumer of a deleted subscription", "consumer", name)
	}
}

// inBucket reports whether the subscription of consumer name (of delivery name delivery) is in
// the bucket; true when that cannot be told.
func (m *selfService) inBucket(ctx context.Context, name, delivery string) bool {
	c, err := m.feed.Consumer(ctx, name)
	if err != nil {
		return true
	}
	key := c.CachedInfo().Config.Metadata[subscriptionMeta]
	if key == "" {
		return true
	}
	s, err := subscription.Last(ctx, m.bucket, key)
	if err != nil {
		return true
	}
	return s != nil && !s.Deleted && s.Record.Delivery == delivery
}
