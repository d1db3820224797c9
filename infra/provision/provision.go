// Package provision creates or updates the streams, the bucket, the consumers and the minute
// schedule of the messaging contract (README, Messaging contract), idempotently: running it twice changes nothing,
// a setting that differs from what exists is updated where NATS allows it and reported
// clearly where it does not.
package provision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
)

// Config is the provisioning setting. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Replicas of every stream and of the bucket: 1, 3 or 5.
	Replicas int
	// Partitions of the commands stream. Commands for one entity always land in the same
	// partition, which one consumer serves in order; more partitions, more parallelism.
	Partitions int
	// Tick is the interval of the emit schedule (at least 1s).
	Tick time.Duration
	// EventsMaxAge is how long outcome events (the audit history) are kept.
	EventsMaxAge time.Duration
	// CommandsMaxAge is how long commands are kept for audit and replay.
	CommandsMaxAge time.Duration
	// DLQMaxAge is how long dead letters are kept.
	DLQMaxAge time.Duration
	// DuplicateWindow is the de-duplication window of the commands and events streams.
	DuplicateWindow time.Duration
	// AckWait is how long a delivered command may go without an ack or a progress signal
	// before it is redelivered. Short, because a replica that dies holding a partition's
	// command stalls that partition for this long; the runtime signals progress while a handler
	// runs, so a slow handler is never redelivered.
	AckWait time.Duration
	// InFlight is how many commands of one partition may be out at once. Each partition is
	// pinned to one replica, which runs commands of different entities at once and those of
	// one entity in order.
	InFlight int
	// Storage of streams and bucket.
	Storage jetstream.StorageType
	// Shards is how many shares the emission and the notices run of one tick are split into
	// (a consumer per shard and function, each pinned to one replica at a time): the most
	// replicas that share a tick. Changing it moves entities between shards; restart the
	// emitter and notices replicas afterwards (they learn the shards when they start).
	Shards int
	// Webhooks provisions the webhook feed, MAINT_WEBHOOK, which the webhook function reads: it
	// copies every outcome event and notice, one more stored (and, synced, one more disk)
	// write each, so it is there only where webhooks are delivered. Created on existing data,
	// it copies what is stored from then on, not the history (no subscription starts before
	// the feed: copying it would only cost writes). Off, the stream is not created, and one
	// that exists is left as it is.
	Webhooks bool
}

// DefaultConfig is what `maintctl provision` does without flags.
func DefaultConfig() Config {
	return Config{
		Replicas:        1,
		Partitions:      8,
		Tick:            time.Minute,
		EventsMaxAge:    400 * 24 * time.Hour,
		CommandsMaxAge:  400 * 24 * time.Hour,
		DLQMaxAge:       30 * 24 * time.Hour,
		DuplicateWindow: 2 * time.Minute,
		AckWait:         5 * time.Second,
		InFlight:        64,
		Shards:          domain.DefaultShards,
		Storage:         jetstream.FileStorage,
	}
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid provisioning config")

// WithDefaults fills zero fields from DefaultConfig and validates the result.
func (c Config) WithDefaults() (Config, error) {
	d := DefaultConfig()
	c.Replicas = cmp.Or(c.Replicas, d.Replicas)
	c.Partitions = cmp.Or(c.Partitions, d.Partitions)
	c.Tick = cmp.Or(c.Tick, d.Tick)
	c.EventsMaxAge = cmp.Or(c.EventsMaxAge, d.EventsMaxAge)
	c.CommandsMaxAge = cmp.Or(c.CommandsMaxAge, d.CommandsMaxAge)
	c.DLQMaxAge = cmp.Or(c.DLQMaxAge, d.DLQMaxAge)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, d.DuplicateWindow)
	c.AckWait = cmp.Or(c.AckWait, d.AckWait)
	c.InFlight = cmp.Or(c.InFlight, d.InFlight)
	c.Shards = cmp.Or(c.Shards, d.Shards)
	switch {
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return c, fmt.Errorf("%w: replicas must be 1, 3 or 5, got %d", ErrInvalidConfig, c.Replicas)
	case c.Partitions < 1 || c.Partitions > 256:
		return c, fmt.Errorf("%w: partitions must be 1-256, got %d", ErrInvalidConfig, c.Partitions)
	case c.Tick < time.Second:
		return c, fmt.Errorf("%w: tick must be at least 1s, got %s", ErrInvalidConfig, c.Tick)
	case c.AckWait < time.Second:
		return c, fmt.Errorf("%w: ack wait must be at least 1s, got %s", ErrInvalidConfig, c.AckWait)
	case c.InFlight < 1 || c.InFlight > 10000:
		return c, fmt.Errorf("%w: in-flight must be 1-10000, got %d", ErrInvalidConfig, c.InFlight)
	case !domain.ValidShardCount(c.Shards):
		return c, fmt.Errorf("%w: emitter shards must divide the %d cells (1, 2, 4 or %d), got %d", ErrInvalidConfig, domain.Cells, domain.Cells, c.Shards)
	}
	return c, nil
}

// Action is what provisioning did to one resource.
type Action string

// Actions.
const (
	Created   Action = "created"
	Unchanged Action = "unchanged"
	Updated   Action = "updated"
	Failed    Action = "failed"
	// Deleted is a consumer the contract no longer has (the single tick consumers of before
	// the shards, or shards past the shard count).
	Deleted Action = "deleted"
)

// Change reports one resource.
type Change struct {
	Kind   string // stream, bucket, consumer, schedule
	Name   string
	Action Action
	// Fields lists the settings that differed.
	Fields []string
	Err    error
}

func (c Change) String() string {
	s := fmt.Sprintf("%-8s %-22s %s", c.Kind, c.Name, c.Action)
	if len(c.Fields) > 0 {
		s += " (" + strings.Join(c.Fields, ", ") + ")"
	}
	if c.Err != nil {
		s += ": " + c.Err.Error()
	}
	return s
}

// Report lists what provisioning did, in order.
type Report []Change

// Err joins the failures of a report; nil when everything is in place.
func (r Report) Err() error {
	var errs []error
	for _, c := range r {
		if c.Action == Failed {
			errs = append(errs, fmt.Errorf("%s %s: %w", c.Kind, c.Name, c.Err))
		}
	}
	return errors.Join(errs...)
}

// Changed reports whether anything was created or updated.
func (r Report) Changed() bool {
	for _, c := range r {
		if c.Action == Created || c.Action == Updated || c.Action == Deleted {
			return true
		}
	}
	return false
}

// Streams returns the stream configurations of the contract.
func Streams(c Config) []jetstream.StreamConfig {
	streams := append(CellStreams(c), []jetstream.StreamConfig{
		{
			Name:        domain.CommandsStream,
			Description: "Maintenance-signal admin and outcome commands (audit, replay)",
			Subjects:    []string{domain.CommandPrefix + "*"},
			// Partition by entity key so that one consumer per partition keeps per-entity order.
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source:      domain.CommandPrefix + "*",
				Destination: domain.CommandPartitionTransform(c.Partitions),
			},
			Retention:  jetstream.LimitsPolicy,
			MaxAge:     c.CommandsMaxAge,
			Duplicates: c.DuplicateWindow,
			Storage:    c.Storage,
			Replicas:   c.Replicas,
		},
		{
			Name:        domain.EventsStream,
			Description: "Maintenance-signal outcome events of the policy commands and the campaigns (audit history)",
			// The entities' events are in their cells' streams (CellStreams).
			Subjects:   []string{domain.PolicyEventPrefix + "*", domain.CampaignEventPrefix + "*"},
			Retention:  jetstream.LimitsPolicy,
			MaxAge:     c.EventsMaxAge,
			Duplicates: c.DuplicateWindow,
			Storage:    c.Storage,
			Replicas:   c.Replicas,
		},
		{
			Name:        domain.PoliciesStream,
			Description: "Maintenance-signal policy commands: customers' maintenance policies set and deleted (audit, replay)",
			Subjects:    []string{domain.PolicyPrefix + "*"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.CommandsMaxAge,
			Duplicates:  c.DuplicateWindow,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
		campaignStream(c),
		{
			Name:        domain.DLQStream,
			Description: "Maintenance-signal commands that could not be handled, with the reason",
			Subjects:    []string{domain.DLQPrefix + "*"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.DLQMaxAge,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
		{
			Name:              domain.ScheduleStream,
			Description:       "Maintenance-signal emit schedule and its ticks",
			Subjects:          []string{domain.ScheduleSubject, domain.TickSubject},
			Retention:         jetstream.LimitsPolicy,
			AllowMsgSchedules: true,
			AllowMsgTTL:       true,
			// Ticks are consumed at once; a handful is history enough.
			MaxMsgsPerSubject: 10,
			Storage:           c.Storage,
			Replicas:          c.Replicas,
		},
		summaryStream(c),
	}...)
	streams = append(streams, subscriptionStreams(c)...)
	if c.Webhooks {
		streams = append(streams, jetstream.StreamConfig{
			Name:        domain.WebhookStream,
			Description: "Maintenance-signal webhook feed: the events and notices, and deliveries sent again from the dead letters",
			Subjects:    []string{domain.WebhookReplayPrefix + ">"},
			Sources:     webhookSources(),
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.DLQMaxAge,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		})
	}
	return streams
}

// summaryStream holds the region's summary parts (README, Regions), which the hub sources: the
// last few ticks of each shard are enough for a hub that was away, as only the newest counts.
func summaryStream(c Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              domain.SummaryStream,
		Description:       "Maintenance-signal region summaries: each emitter shard's counts at each tick, sourced by the hub",
		Subjects:          []string{domain.SummarySubjects},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 10,
		MaxAge:            24 * time.Hour,
		Duplicates:        c.DuplicateWindow,
		Storage:           c.Storage,
		Replicas:          c.Replicas,
	}
}

// CellStreams returns the cells' streams of entity events and notices (domain.Cells each),
// kept as long as the events.
func CellStreams(c Config) []jetstream.StreamConfig {
	var out []jetstream.StreamConfig
	md := map[string]string{domain.MetaLayout: strconv.Itoa(domain.LayoutVersion)}
	for _, cell := range domain.AllCells() {
		out = append(out, jetstream.StreamConfig{
			Name:        cell.EventsStream(),
			Description: "Maintenance-signal outcome events of the entities of cell " + cell.String() + ", one per command (audit history)",
			Subjects:    []string{cell.EventsSubjects()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.EventsMaxAge,
			Duplicates:  c.DuplicateWindow,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			Metadata:    md,
		}, jetstream.StreamConfig{
			Name:        cell.NoticesStream(),
			Description: "Maintenance-signal lifecycle notices of the entities of cell " + cell.String() + ": reminders, due, overdue, stuck",
			Subjects:    []string{cell.NoticesSubjects()},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      c.EventsMaxAge, // notices are kept as long as events
			Duplicates:  c.DuplicateWindow,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			Metadata:    md,
		})
	}
	return out
}

// webhookSources are the streams the webhook feed copies: every cell's events and notices,
// and the policies' and campaigns' events.
func webhookSources() []*jetstream.StreamSource {
	out := []*jetstream.StreamSource{{Name: domain.EventsStream}}
	for _, cell := range domain.AllCells() {
		out = append(out, &jetstream.StreamSource{Name: cell.EventsStream()}, &jetstream.StreamSource{Name: cell.NoticesStream()})
	}
	return out
}

// RecordsBuckets returns the configuration of every cell's records bucket (domain.Cells):
// one revision per key, direct gets allowed (a tenant's reader may send only those; the
// command function reads from the leader, store.Store.Get).
func RecordsBuckets(c Config) []jetstream.KeyValueConfig {
	var out []jetstream.KeyValueConfig
	for _, cell := range domain.AllCells() {
		out = append(out, jetstream.KeyValueConfig{
			Bucket:      cell.RecordsBucket(),
			Description: "Current maintenance record of every entity of cell " + cell.String(),
			History:     1,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			Metadata:    map[string]string{domain.MetaLayout: strconv.Itoa(domain.LayoutVersion)},
			// Tombstones carry a time to live (store.Store.SetForgetAfter); when one passes,
			// a marker tells the readers that follow the bucket, then goes too.
			LimitMarkerTTL: time.Hour,
		})
	}
	return out
}

// PoliciesBucket returns the policies bucket's configuration: the policy in force of each
// scope, with the history by which the command function judges a command by the policy of its
// stored time (domain.PoliciesHistory revisions of each scope).
func PoliciesBucket(c Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      domain.PoliciesBucket,
		Description: "Customers' maintenance policies, by scope, with their recent revisions",
		History:     domain.PoliciesHistory,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	}
}

// StreamConsumer is a durable consumer and the stream it reads.
type StreamConsumer = registry.Consumer

// Consumers returns the durable consumers of every function (registry.Function.Consumers).
func Consumers(c Config) []StreamConsumer {
	return registry.ProvisionedConsumers(c.Topology())
}

// Topology is what the functions' consumers take from the provisioning setting.
func (c Config) Topology() registry.Topology {
	return registry.Topology{Replicas: c.Replicas, Partitions: c.Partitions, InFlight: c.InFlight, AckWait: c.AckWait, Tick: c.Tick, Shards: c.Shards}
}

// retired reports whether a consumer of the schedule stream is one the contract no longer
// has: the single tick consumers of before the shards, or a shard past the count.
func retired(c Config, name string) bool {
	if name == domain.EmitterConsumer || name == domain.NoticesConsumer {
		return true
	}
	for _, prefix := range []string{domain.EmitterShardPrefix, domain.NoticesShardPrefix} {
		if domain.IsShardConsumer(name, prefix) {
			n, _ := strconv.Atoi(strings.TrimPrefix(name, prefix))
			return n >= c.Shards
		}
	}
	return false
}

// retireConsumers deletes the retired consumers of the schedule stream. A replica of an older
// version still serving one stops getting ticks (it would emit the whole fleet a second time).
func retireConsumers(ctx context.Context, js jetstream.JetStream, c Config) Report {
	s, err := js.Stream(ctx, domain.ScheduleStream)
	if err != nil {
		return Report{{Kind: "consumer", Name: domain.ScheduleStream + "/*", Action: Failed, Err: err}}
	}
	var rep Report
	names := s.ConsumerNames(ctx)
	var old []string
	for name := range names.Name() {
		if retired(c, name) {
			old = append(old, name)
		}
	}
	if err := names.Err(); err != nil {
		rep = append(rep, Change{Kind: "consumer", Name: domain.ScheduleStream + "/*", Action: Failed, Err: err})
	}
	slices.Sort(old)
	for _, name := range old {
		ch := Change{Kind: "consumer", Name: domain.ScheduleStream + "/" + name, Action: Deleted}
		if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			ch.Action, ch.Err = Failed, err
		}
		rep = append(rep, ch)
	}
	return rep
}

// Run provisions everything and reports what it did. It carries on past a failed resource so
// that the report is complete; Report.Err joins the failures.
func Run(ctx context.Context, js jetstream.JetStream, c Config) (Report, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	var rep Report
	failed := map[string]bool{}
	// The cells first, and what the first layout kept moved into them (migrate.go), before
	// the streams it was kept in change.
	cells := true
	for _, sc := range CellStreams(c) {
		ch := ensureStream(ctx, js, sc)
		failed[sc.Name] = ch.Action == Failed
		cells = cells && ch.Action != Failed
		rep = append(rep, ch)
	}
	for _, b := range RecordsBuckets(c) {
		ch := ensureBucketDirect(ctx, js, b, true)
		cells = cells && ch.Action != Failed
		rep = append(rep, ch)
	}
	eventsMoved := false
	if cells {
		ev := migrateEvents(ctx, js)
		eventsMoved = ev.Action != Failed
		rep = append(rep, migrateRecords(ctx, js), ev, migrateNotices(ctx, js))
	}
	for _, sc := range Streams(c)[len(CellStreams(c)):] {
		if sc.Name == domain.EventsStream && !eventsMoved {
			// It still holds the entities' events of the first layout: left as it is.
			rep = append(rep, Change{Kind: "stream", Name: sc.Name, Action: Unchanged})
			continue
		}
		ch := ensureStream(ctx, js, sc)
		failed[sc.Name] = ch.Action == Failed
		rep = append(rep, ch)
	}
	rep = append(rep, ensureBucket(ctx, js, PoliciesBucket(c)), migratePolicies(ctx, js))
	for _, b := range CampaignBuckets(c) {
		rep = append(rep, ensureBucket(ctx, js, b))
	}
	rep = append(rep, migrateCampaignEntities(ctx, js))
	for _, b := range SubscriptionBuckets(c) {
		rep = append(rep, ensureBucket(ctx, js, b))
	}
	rep = append(rep, ensureObjectStore(ctx, js, CampaignLists(c)))
	for _, sc := range Consumers(c) {
		if failed[sc.Stream] {
			continue // its stream is not as it should be: the report says why
		}
		rep = append(rep, ensureConsumer(ctx, js, sc.Stream, sc.ConsumerConfig))
	}
	if !failed[domain.ScheduleStream] {
		rep = append(rep, retireConsumers(ctx, js, c)...)
	}
	rep = append(rep, ensureSchedule(ctx, js, c.Tick))
	return rep, rep.Err()
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) Change {
	ch := Change{Kind: "stream", Name: want.Name}
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if err := startSourcesAtEnd(ctx, js, want.Sources); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
		if _, err := js.CreateStream(ctx, want); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
		ch.Action = Created
		return ch
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	have := s.CachedInfo().Config
	keepSourceStarts(have.Sources, want.Sources)
	// A source added to an existing stream copies from now on, as a new stream's do.
	if err := startSourcesAtEnd(ctx, js, want.Sources); err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	ch.Fields = streamDiff(have, want)
	if len(ch.Fields) == 0 {
		ch.Action = Unchanged
		return ch
	}
	if slices.Contains(ch.Fields, "subject_transform") {
		// Another partition count sends an entity's next commands to another partition, where
		// they could overtake the ones still queued in the old one.
		ch.Action = Failed
		ch.Err = fmt.Errorf("%w: the partition count of an existing commands stream cannot change (have %q, want %q): keep --partitions as it was", ErrInvalidConfig, transformDest(have), transformDest(want))
		return ch
	}
	if _, err := js.UpdateStream(ctx, want); err != nil {
		ch.Action = Failed
		ch.Err = fmt.Errorf("NATS does not allow changing %s of an existing stream: %w (recreate it, or keep the old setting)", strings.Join(ch.Fields, ", "), err)
		return ch
	}
	ch.Action = Updated
	return ch
}

func transformDest(c jetstream.StreamConfig) string {
	if c.SubjectTransform == nil {
		return ""
	}
	return c.SubjectTransform.Destination
}

func streamDiff(have, want jetstream.StreamConfig) []string {
	var d []string
	add := func(name string, differ bool) {
		if differ {
			d = append(d, name)
		}
	}
	add("subjects", !reflect.DeepEqual(have.Subjects, want.Subjects))
	add("subject_transform", !reflect.DeepEqual(have.SubjectTransform, want.SubjectTransform))
	add("retention", have.Retention != want.Retention)
	add("max_age", have.MaxAge != want.MaxAge)
	add("duplicate_window", want.Duplicates != 0 && have.Duplicates != want.Duplicates)
	add("storage", have.Storage != want.Storage)
	add("replicas", have.Replicas != want.Replicas)
	add("allow_msg_schedules", have.AllowMsgSchedules != want.AllowMsgSchedules)
	add("allow_msg_ttl", have.AllowMsgTTL != want.AllowMsgTTL)
	add("max_msgs_per_subject", want.MaxMsgsPerSubject != 0 && have.MaxMsgsPerSubject != want.MaxMsgsPerSubject)
	add("description", have.Description != want.Description)
	add("sources", !slices.Equal(sourceNames(have.Sources), sourceNames(want.Sources)))
	return d
}

// startSourcesAtEnd makes a new stream copy from each source only what is stored after its
// creation: the next sequence of each source as it is now.
func startSourcesAtEnd(ctx context.Context, js jetstream.JetStream, sources []*jetstream.StreamSource) error {
	for _, src := range sources {
		if src.OptStartSeq != 0 || src.OptStartTime != nil {
			continue
		}
		s, err := js.Stream(ctx, src.Name)
		if err != nil {
			return fmt.Errorf("source %s: %w", src.Name, err)
		}
		src.OptStartSeq = s.CachedInfo().State.LastSeq + 1
	}
	return nil
}

// keepSourceStarts gives want's sources the start positions the existing stream has, so that
// an update does not restate where they began.
func keepSourceStarts(have, want []*jetstream.StreamSource) {
	for _, w := range want {
		for _, h := range have {
			if h.Name == w.Name {
				w.OptStartSeq, w.OptStartTime = h.OptStartSeq, h.OptStartTime
			}
		}
	}
}

// sourceNames compares sources by the streams they name (the server fills in the rest).
func sourceNames(ss []*jetstream.StreamSource) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) Change {
	return ensureBucketDirect(ctx, js, want, want.Replicas <= 1)
}

// ensureBucketDirect creates or updates a bucket, with direct gets on or off.
func ensureBucketDirect(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, direct bool) Change {
	ch := Change{Kind: "bucket", Name: want.Bucket}
	name := "KV_" + want.Bucket
	s, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := js.CreateKeyValue(ctx, want); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
		ch.Action = Created
	case err != nil:
		ch.Action, ch.Err = Failed, err
		return ch
	default:
		have := s.CachedInfo().Config
		add := func(name string, differ bool) {
			if differ {
				ch.Fields = append(ch.Fields, name)
			}
		}
		add("history", have.MaxMsgsPerSubject != int64(want.History))
		add("storage", have.Storage != want.Storage)
		add("replicas", have.Replicas != want.Replicas)
		add("description", have.Description != want.Description)
		add("allow_direct", have.AllowDirect != direct)
		add("limit_marker_ttl", want.LimitMarkerTTL != 0 && have.SubjectDeleteMarkerTTL != want.LimitMarkerTTL)
		for k, v := range want.Metadata {
			add("metadata", have.Metadata[k] != v)
		}
		if len(ch.Fields) == 0 {
			ch.Action = Unchanged
			return ch
		}
		if _, err := js.UpdateKeyValue(ctx, want); err != nil {
			ch.Action = Failed
			ch.Err = fmt.Errorf("NATS does not allow changing %s of an existing bucket: %w", strings.Join(ch.Fields, ", "), err)
			return ch
		}
		ch.Action = Updated
	}
	// Replicated, reads go to the stream leader: a direct get may be answered by a follower
	// that lags, and a command judged on a stale record could be wrongly refused (a refusal
	// writes nothing, so no compare-and-swap would catch it). With one replica there is no
	// follower, and direct gets are much cheaper.
	if direct {
		return ch
	}
	if err := disableDirect(ctx, js, name); err != nil {
		ch.Action, ch.Err = Failed, err
	}
	return ch
}

func disableDirect(ctx context.Context, js jetstream.JetStream, stream string) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("turn off direct gets on %s: %w", stream, err)
	}
	return nil
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) Change {
	ch := Change{Kind: "consumer", Name: stream + "/" + want.Durable}
	c, err := js.Consumer(ctx, stream, want.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		if _, err := js.CreateConsumer(ctx, stream, want); err != nil {
			ch.Action, ch.Err = Failed, err
			return ch
		}
		ch.Action = Created
		return ch
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	have := c.CachedInfo().Config
	add := func(name string, differ bool) {
		if differ {
			ch.Fields = append(ch.Fields, name)
		}
	}
	add("filter_subject", have.FilterSubject != want.FilterSubject)
	add("ack_policy", have.AckPolicy != want.AckPolicy)
	add("deliver_policy", have.DeliverPolicy != want.DeliverPolicy)
	add("max_ack_pending", have.MaxAckPending != want.MaxAckPending)
	add("ack_wait", have.AckWait != want.AckWait)
	add("max_deliver", have.MaxDeliver != want.MaxDeliver)
	add("priority_policy", have.PriorityPolicy != want.PriorityPolicy)
	add("priority_groups", !slices.Equal(have.PriorityGroups, want.PriorityGroups))
	add("pinned_ttl", have.PinnedTTL != want.PinnedTTL)
	add("replicas", want.Replicas != 0 && have.Replicas != want.Replicas && have.Replicas != 0)
	add("description", have.Description != want.Description)
	// The server adds metadata of its own (_nats.*): compare ours only.
	add("metadata", !metadataHolds(have.Metadata, want.Metadata))
	if len(ch.Fields) == 0 {
		ch.Action = Unchanged
		return ch
	}
	if _, err := js.UpdateConsumer(ctx, stream, want); err != nil {
		ch.Action = Failed
		ch.Err = fmt.Errorf("NATS does not allow changing %s of an existing consumer: %w (delete the consumer while no function runs and provision again)", strings.Join(ch.Fields, ", "), err)
		return ch
	}
	ch.Action = Updated
	return ch
}

// metadataHolds reports whether have carries every entry of want.
func metadataHolds(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// ScheduleSpec is the Nats-Schedule header value for a tick interval.
func ScheduleSpec(tick time.Duration) string { return "@every " + tick.String() }

// ScheduledTick reads the tick interval of the provisioned emit schedule, for a process that
// is not told it (maintctl function emitter).
func ScheduledTick(ctx context.Context, js jetstream.JetStream) (time.Duration, error) {
	s, err := js.Stream(ctx, domain.ScheduleStream)
	if err != nil {
		return 0, fmt.Errorf("schedule stream: %w", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, domain.ScheduleSubject)
	if err != nil {
		return 0, fmt.Errorf("schedule: %w", err)
	}
	spec := m.Header.Get(jetstream.ScheduleHeader)
	every, ok := strings.CutPrefix(spec, "@every ")
	tick, err := time.ParseDuration(every)
	if !ok || err != nil || tick <= 0 {
		return 0, fmt.Errorf("schedule %q is not @every DURATION", spec)
	}
	return tick, nil
}

func ensureSchedule(ctx context.Context, js jetstream.JetStream, tick time.Duration) Change {
	ch := Change{Kind: "schedule", Name: domain.ScheduleSubject}
	want := ScheduleSpec(tick)
	s, err := js.Stream(ctx, domain.ScheduleStream)
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch
	}
	last, err := s.GetLastMsgForSubject(ctx, domain.ScheduleSubject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		ch.Action = Created
	case err != nil:
		ch.Action, ch.Err = Failed, err
		return ch
	default:
		have := last.Header.Get(jetstream.ScheduleHeader)
		target := last.Header.Get(jetstream.ScheduleTargetHeader)
		if have == want && target == domain.TickSubject {
			ch.Action = Unchanged
			return ch
		}
		ch.Action, ch.Fields = Updated, []string{fmt.Sprintf("%q -> %q", have, want)}
	}
	// One schedule per subject: publishing again replaces it.
	_, err = js.Publish(ctx, domain.ScheduleSubject, nil,
		jetstream.WithScheduleEvery(tick),
		jetstream.WithScheduleTarget(domain.TickSubject),
		// A tick nobody consumed is worthless after a few intervals.
		jetstream.WithScheduleTTL(max(3*tick, 10*time.Second)),
	)
	if err != nil {
		ch.Action, ch.Err = Failed, fmt.Errorf("publish schedule: %w", err)
	}
	return ch
}
