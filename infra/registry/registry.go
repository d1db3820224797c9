// Package registry lists the functions of Maintenance Signals, each with what everything that
// runs, provisions, secures or deploys it needs to know: its flags and how to run it (`maintctl
// up`, `maintctl function NAME`), the durable consumers provisioning creates for it
// (infra/provision), what its NATS role must allow (infra/nats), how long it takes to drain and
// whether the tick drives it (the Kubernetes manifests and their tests, infra/k8s). Adding a
// function is one entry in Functions; the consistency tests of those packages fail until the
// manifests, the role and the provisioning follow (infra/docs/contributing.md, Adding a
// function, has the checklist).
package registry

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"maintsignals/shared/domain"
	"maintsignals/shared/telemetry"
)

// Function is one function: a stateless unit that serves NATS consumers and scales on the work
// waiting for them.
type Function struct {
	// Name is the word of `maintctl function NAME`; the Deployment is maint-NAME.
	Name string
	// About is its one-line description.
	About string
	// Role is the NATS role (infra/nats) its user plays: it must allow Serves and Access.
	Role string
	// Tick says that the tick schedule drives it: a lone replica reads the tick interval from
	// the schedule, and it never scales to zero (each tick would wait for a cold start).
	Tick bool
	// Drain is how long it may take to stop after SIGTERM; a pod's grace period outlasts it.
	Drain time.Duration
	// Consumers are the durable consumers provisioning creates for it (none for a function
	// that creates its own, see Serve.Creates).
	Consumers func(Topology) []Consumer
	// Serves names the consumers it pulls from, for its role and its scaler.
	Serves []Serve
	// Access is what else it does on NATS.
	Access Access
	// Flags adds the function's own flags to fs and returns the function bound to their values.
	Flags func(fs *pflag.FlagSet) Instance
}

// Topology is what the provisioned consumers depend on (the settings of infra/provision).
type Topology struct {
	Replicas int
	// Partitions of the commands stream, and InFlight commands out at once per partition.
	Partitions int
	InFlight   int
	// AckWait of a command's delivery.
	AckWait time.Duration
	// Tick is the schedule's interval.
	Tick time.Duration
	// Shards of a tick (provision --emitter-shards): a consumer per shard for each function
	// the tick drives.
	Shards int
}

// Consumer is a durable consumer and the stream it reads.
type Consumer struct {
	Stream string
	jetstream.ConsumerConfig
}

// Serve is a set of durable consumers of one stream that a function pulls from and acknowledges.
type Serve struct {
	Stream string
	// Consumer is a consumer's name, or "*" when the names depend on the provisioning (the
	// partitions) or on the function's configuration (the subscriptions): then they all start
	// with Prefix.
	Consumer string
	Prefix   string
	// Pinned: pulled in a priority group with pinned_client (one replica per consumer at a
	// time); a replica that stops unpins what it holds.
	Pinned bool
	// Creates: the function creates these consumers itself, from its configuration, so that
	// adding one needs no provisioning run.
	Creates bool
}

// Matches reports whether a consumer of stream is one of s.
func (s Serve) Matches(stream, consumer string) bool {
	if stream != s.Stream {
		return false
	}
	if s.Consumer == "*" {
		return strings.HasPrefix(consumer, s.Prefix) && len(consumer) > len(s.Prefix)
	}
	return consumer == s.Consumer
}

// Access is what a function does on NATS besides serving its consumers.
type Access struct {
	// Publish lists the subjects it publishes to (RecordsSubjects: it writes records).
	Publish []string
	// Read lists the streams it reads through ordered consumers and gets (RecordsStreams: it
	// reads records or scans the bucket).
	Read []string
	// Get lists the streams it reads single messages of.
	Get []string
	// API lists further JetStream API subjects it uses.
	API []string
}

// The records' buckets (one per cell, domain.Cells) as NATS streams and subjects.
var (
	RecordsStreams  = recordsStreams()
	RecordsSubjects = recordsSubjects()
	// The cells' streams of entity events and of notices.
	EventsStreams  = domain.EventsStreams()
	NoticesStreams = domain.NoticesStreams()
)

func recordsStreams() []string {
	var out []string
	for _, c := range domain.AllCells() {
		out = append(out, c.RecordsStream())
	}
	return out
}

func recordsSubjects() []string {
	var out []string
	for _, c := range domain.AllCells() {
		out = append(out, "$KV."+c.RecordsBucket()+".>")
	}
	return out
}

// Instance is a function bound to the values of its flags.
type Instance struct {
	// Check validates the flags before any function starts (nil: nothing to check): a wrong
	// setting stops everything before anything runs.
	Check func(ctx context.Context, log *slog.Logger) error
	// Run serves until ctx is cancelled, then drains and returns nil.
	Run func(ctx context.Context, env Env) error
	// Idle reports that with these flags the function has nothing to do (nil: never): `up`
	// runs it idle and does not provision the streams only it reads.
	Idle func() bool
	// Address, for a function that serves people (the web view), is its URL once Check has
	// run ("" when it serves none): `up` prints it.
	Address func() string
}

// Env is what a function gets from the process that runs it.
type Env struct {
	JS jetstream.JetStream
	// ByRole, when set, holds the connections for functions of other roles than JS's (`up` on
	// a server with users: the web view reads as a reader); a function whose role is not
	// there uses JS.
	ByRole map[string]jetstream.JetStream
	Tel    *telemetry.Telemetry
	Log    *slog.Logger
	// Tick is the schedule interval, when known; 0 otherwise.
	Tick time.Duration
	// Up: run by `maintctl up`, with every other function, rather than alone.
	Up bool
}

// Functions lists every function, in the order `maintctl up` starts them. Each call returns
// new values.
func Functions() []Function {
	return []Function{commandFunction(), emitterFunction(), noticesFunction(), webhookFunction(), policiesFunction(), webFunction(), campaignFunction(),
		subscriptionsFunction()}
}

// Lookup returns the function called name.
func Lookup(name string) (Function, bool) {
	for _, f := range Functions() {
		if f.Name == name {
			return f, true
		}
	}
	return Function{}, false
}

// Names lists the functions' names, comma-separated, for messages.
func Names() string {
	var names []string
	for _, f := range Functions() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// ProvisionedConsumers returns the consumers of every function for a topology, in order.
func ProvisionedConsumers(t Topology) []Consumer {
	var out []Consumer
	for _, f := range Functions() {
		if f.Consumers != nil {
			out = append(out, f.Consumers(t)...)
		}
	}
	return out
}

// Of returns the function whose Serves match a consumer of stream.
func Of(stream, consumer string) (Function, bool) {
	for _, f := range Functions() {
		for _, s := range f.Serves {
			if s.Matches(stream, consumer) {
				return f, true
			}
		}
	}
	return Function{}, false
}

// Streams lists the streams a function's consumers read.
func (f Function) Streams() []string {
	var out []string
	for _, s := range f.Serves {
		if !slices.Contains(out, s.Stream) {
			out = append(out, s.Stream)
		}
	}
	return out
}

// Scaled reports whether work waiting on consumers wakes the function (a KEDA ScaledObject).
func (f Function) Scaled() bool { return len(f.Serves) > 0 }

// CreatesConsumers reports whether the function creates consumers of its own.
func (f Function) CreatesConsumers() bool {
	return slices.ContainsFunc(f.Serves, func(s Serve) bool { return s.Creates })
}
