// Package natsconf is the NATS server configuration of the project: the least-privilege users
// (one role each) as Go data, and the nats-server.conf files rendered from that same data.
// The embedded server of the tests and of `maintctl up` takes its users from here (NkeyUsers),
// the checked-in single.conf and cluster.conf are rendered from here (`go run ./infra/nats/gen`),
// and a test fails when they drift apart, so that what the tests prove is what production runs.
//
// The import path is maintsignals/infra/nats; the package is called natsconf so that it does
// not shadow nats.go's package nats.
package natsconf

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"maintsignals/infra/registry"
	"maintsignals/shared/domain"
)

// Role is a set of permissions shared by the parties that play it.
type Role string

// Roles, from the most to the least powerful.
const (
	// RoleOperator provisions: the only role that creates, updates, purges or deletes streams,
	// the bucket and consumers (the whole JetStream API). It sends no commands and writes no
	// records.
	RoleOperator Role = "operator"
	// RoleAdmin is an SRE or maintctl: sends commands and policy commands, reads records,
	// events, dead letters and policies, and replays dead letters (which removes them from
	// MAINT_DLQ).
	RoleAdmin Role = "admin"
	// RoleUpdater is whatever performs an update and reports its outcome. NATS permissions are
	// per subject and the task is in the body, so at the NATS level an updater may publish any
	// command, like an admin. What limits it to UpdateSucceeded and UpdateFailed is the command
	// function: with command signing required (maintsignals/shared/signing), a command must be
	// signed by a configured key whose role allows its task, else it is rejected with
	// Unauthorized (README, Messaging contract). The updater's NATS nkey may double as its signing key.
	RoleUpdater Role = "updater"
	// RoleFunction runs the functions of infra/registry whose Role it is (command, emitter,
	// notices, webhook): exactly what their entries say they do (functionsNeed), and it may
	// NOT publish commands (a compromised function cannot forge an admin's command).
	RoleFunction Role = "function"
	// RoleCampaign runs the campaign function: what its entry says it does, which includes
	// publishing commands (the campaigns' announcements and withdrawals, signed with its own
	// key where signatures are required) but no record, outcome event, notice or dead letter.
	RoleCampaign Role = "campaign"
	// RoleReader reads records, outcome events, notices and policies (dashboards,
	// integrators), and what the functions of infra/registry whose role it is read (the web
	// view: the campaigns' state), nothing else.
	RoleReader Role = "reader"
	// RoleCustomer is a customer's tooling: it publishes commands and policy commands and
	// reads what a reader reads. As for an updater, NATS cannot tell one task or scope from
	// another: what takes effect is decided by the signature (a customer signer may set the
	// policies of its scopes and reschedule their entities, nothing else). A key is one subject
	// token, so NATS cannot confine its reads to its own entities either.
	RoleCustomer Role = "customer"
)

var roles = []Role{RoleOperator, RoleAdmin, RoleUpdater, RoleFunction, RoleCampaign, RoleReader, RoleCustomer}

// Roles lists every role.
func Roles() []Role { return slices.Clone(roles) }

// ErrUnknownRole is wrapped when a role is not one of Roles.
var ErrUnknownRole = errors.New("unknown role")

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(roles, r) }

// InboxPrefix is the role's private reply-subject prefix. Its clients must connect with
// nats.CustomInboxPrefix(r.InboxPrefix()) (natsconn.Options.InboxPrefix): a role may subscribe
// only to its own inboxes, so that a reader cannot listen in on `_INBOX.>` and see the
// commands the server delivers to a function's pull requests, nor another role's replies.
func (r Role) InboxPrefix() string { return "_INBOX_" + string(r) }

// Names of the contract used in subjects.
const (
	api = "$JS.API."
)

// KVSubjects are the subjects of the records in the cells' buckets.
var KVSubjects = registry.RecordsSubjects

// readEvents lets a role read the events (the cells', the policies' and campaigns') and the
// notices.
func readEvents() []string {
	out := readStream(domain.EventsStream)
	for _, s := range slices.Concat(registry.EventsStreams, registry.NoticesStreams) {
		out = append(out, readStream(s)...)
	}
	return out
}

// readRecords lets a role read every cell's records.
func readRecords() []string {
	var out []string
	for _, s := range registry.RecordsStreams {
		out = append(out, readStream(s)...)
	}
	return out
}

// Permissions returns the permission set of a role. Each call returns a new value.
func (r Role) Permissions() (*server.Permissions, error) {
	var pub, sub []string
	switch r {
	case RoleOperator:
		pub = []string{
			api + ">", // provisioning: streams, bucket, consumers, and everything a reader does
			domain.ScheduleSubject,
		}
	case RoleAdmin:
		pub = slices.Concat(
			[]string{domain.CommandPrefix + "*", domain.PolicyPrefix + "*"},
			readRecords(), readEvents(), readStream(domain.DLQStream), readStream(domain.PoliciesBucketStream),
			// `maintctl dlq replay` deletes the dead letter it sent through again; a webhook
			// delivery's goes back to its subscription through MAINT_WEBHOOK.
			[]string{api + "STREAM.MSG.DELETE." + domain.DLQStream, domain.WebhookReplayPrefix + ">"},
			campaignControl,
		)
		sub = []string{domain.EventPrefix + ">", domain.NoticePrefix + ">", domain.CampaignEventPrefix + ">"}
	case RoleUpdater:
		// Reads too: client.Send waits for the outcome event and reads the record.
		pub = slices.Concat(
			[]string{domain.CommandPrefix + "*"},
			readRecords(), readEvents(),
		)
		sub = []string{domain.EventPrefix + ">", domain.NoticePrefix + ">"}
	case RoleCampaign:
		// Only what the campaign function does (functionsNeed).
	case RoleFunction:
		// Only what its functions do (functionsNeed, below): write records and publish
		// outcome events, notices and dead letters; it may NOT publish commands (a
		// compromised function cannot forge an admin's command).
	case RoleReader:
		pub = reads()
		sub = []string{domain.EventPrefix + ">", domain.NoticePrefix + ">"}
	case RoleCustomer:
		// Reads too: client.Send and SendPolicy wait for the outcome and read the record.
		pub = slices.Concat([]string{domain.CommandPrefix + "*", domain.PolicyPrefix + "*"}, reads())
		sub = []string{domain.EventPrefix + ">", domain.NoticePrefix + ">"}
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownRole, r)
	}
	pub, sub = subscriptionAccess(r, pub, sub)
	if r != RoleOperator {
		// What the functions of the registry that play this role do (the deny list below
		// still applies), and account info, for health checks.
		pub = appendNew(pub, functionsNeed(r)...)
		pub = append(pub, api+"INFO")
	}
	sub = append(sub, r.InboxPrefix()+".>") // replies, on the role's private inboxes
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}
	if r != RoleOperator {
		// The allow lists already leave these out; deny wins over allow, so listing them
		// keeps them closed even if an allow entry is widened by mistake later.
		p.Publish.Deny = denied(r)
	}
	return p, nil
}

// MayPublish reports whether the role may publish to subject (a JetStream API request is a
// publish too): an allow entry matches it and no deny entry does.
func (r Role) MayPublish(subject string) bool {
	p, err := r.Permissions()
	if err != nil {
		return false
	}
	match := func(filters []string) bool {
		return slices.ContainsFunc(filters, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
	}
	return match(p.Publish.Allow) && !match(p.Publish.Deny)
}

// campaignControl is what `maintctl campaign` takes: store a list in the Object Store (its
// chunks and its metadata), send campaign commands and read the campaigns, their entities and
// their lists.
var campaignControl = slices.Concat(
	[]string{domain.CampaignCommandPrefix + "*", "$O." + domain.CampaignListsBucket + ".>"},
	readStream(registry.CampaignsStream), readStream(registry.CampaignEntitiesStream), readStream(registry.CampaignListsStream),
)

// readStream is what reading stream s takes: stream info, a message get (the bucket's reads
// go to the stream leader: provisioning turns direct gets off), direct gets (allowed for the
// day they are turned on), and an ordered consumer (history, watch, the bucket scan), which
// creates, reads and, on a reset, deletes an ephemeral consumer.
//
// CONSUMER.CREATE cannot tell an ephemeral consumer from a durable one: a reader could create
// durables on these streams. They hold no durable consumers of the contract (those live on
// MAINT_COMMANDS and MAINT_SCHEDULE), so this can cost resources but cannot steal work.
func readStream(s string) []string {
	return []string{
		api + "STREAM.INFO." + s,
		api + "STREAM.MSG.GET." + s,
		api + "DIRECT.GET." + s,
		api + "DIRECT.GET." + s + ".>",
		api + "CONSUMER.CREATE." + s + ".>",
		api + "CONSUMER.INFO." + s + ".*",
		api + "CONSUMER.DELETE." + s + ".*",
		api + "CONSUMER.MSG.NEXT." + s + ".*",
	}
}

// reads are a reader's: records, outcome events, notices and policies.
func reads() []string {
	return slices.Concat(readRecords(), readEvents(), readStream(domain.PoliciesBucketStream))
}

// getOnly lets a role read single messages of a stream, without consumers of its own.
func getOnly(s string) []string {
	return []string{
		api + "STREAM.INFO." + s,
		api + "STREAM.MSG.GET." + s,
		api + "DIRECT.GET." + s,
		api + "DIRECT.GET." + s + ".>",
	}
}

// serve is what serving the durable consumer(s) sv takes: find them, pull, and ack, nak, term
// or signal progress; for pinned ones, unpin them when a replica stops; for the ones a function
// makes from its own configuration (a webhook subscription's), create them. Nothing here
// changes or deletes a consumer that provisioning made.
func serve(sv registry.Serve) []string {
	s, c := sv.Stream, sv.Consumer
	out := []string{
		api + "STREAM.INFO." + s,
		api + "CONSUMER.INFO." + s + "." + c,
		api + "CONSUMER.MSG.NEXT." + s + "." + c,
		"$JS.ACK." + s + ".>",
	}
	if sv.Creates {
		out = append(out, api+"CONSUMER.CREATE."+s+"."+c, api+"CONSUMER.CREATE."+s+"."+c+".>")
	}
	if sv.Pinned {
		out = append(out, api+"CONSUMER.UNPIN."+s+"."+c)
	}
	return out
}

// appendNew appends the subjects that list does not hold yet, in order.
func appendNew(list []string, subjects ...string) []string {
	for _, s := range subjects {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// functionsNeed is the union of what the functions of role r do on NATS, each subject once, in
// the order of the registry.
func functionsNeed(r Role) []string {
	var out []string
	add := func(subjects ...string) { out = appendNew(out, subjects...) }
	for _, f := range registry.Functions() {
		if f.Role != string(r) {
			continue
		}
		add(f.Access.Publish...)
		for _, s := range f.Access.Read {
			add(readStream(s)...)
		}
		for _, sv := range f.Serves {
			add(serve(sv)...)
		}
		add(f.Access.API...)
		for _, s := range f.Access.Get {
			add(getOnly(s)...)
		}
	}
	return out
}

// adminPlane is the part of the JetStream API that only the operator may use: changing or
// destroying streams (the bucket is stream KV_maintenance), consumers, the cluster.
var adminPlane = []string{
	api + "STREAM.CREATE.>",
	api + "STREAM.UPDATE.>",
	api + "STREAM.DELETE.>",
	api + "STREAM.PURGE.>",
	api + "STREAM.RESTORE.>",
	api + "STREAM.SNAPSHOT.>",
	api + "STREAM.PEER.REMOVE.>",
	api + "STREAM.LEADER.STEPDOWN.>",
	api + "CONSUMER.DURABLE.CREATE.>",
	api + "CONSUMER.LEADER.STEPDOWN.>",
	api + "CONSUMER.PAUSE.>",
	api + "CONSUMER.RESET.>",
	unpinAny,
	api + "ACCOUNT.>",
	api + "META.>",
	api + "SERVER.>",
	// Single messages of the audit trail, the schedule and the records. (Dead letters are
	// left out: an admin removes the one it replays.)
	api + "STREAM.MSG.DELETE." + domain.CommandsStream,
	api + "STREAM.MSG.DELETE." + domain.EventsStream,
	api + "STREAM.MSG.DELETE." + domain.ScheduleStream,
	api + "STREAM.MSG.DELETE." + domain.PoliciesStream,
	api + "STREAM.MSG.DELETE." + domain.PoliciesBucketStream,
}

const unpinAny = api + "CONSUMER.UNPIN.>"

// unpins reports whether a function of role r serves pinned consumers.
func unpins(r Role) bool {
	for _, f := range registry.Functions() {
		if f.Role == string(r) && slices.ContainsFunc(f.Serves, func(s registry.Serve) bool { return s.Pinned }) {
			return true
		}
	}
	return false
}

// denied is the explicit publish deny list of a non-operator role.
func denied(r Role) []string {
	d := slices.Clone(adminPlane)
	for _, s := range slices.Concat(registry.RecordsStreams, registry.EventsStreams, registry.NoticesStreams) {
		d = append(d, api+"STREAM.MSG.DELETE."+s) // a record, an event, a notice
	}
	if unpins(r) {
		// A function replica that stops releases the consumers pinned to it (the allow list
		// names only its own).
		d = slices.DeleteFunc(d, func(s string) bool { return s == unpinAny })
	}
	if r != RoleFunction {
		// Only the functions write records, outcome events and dead letters: a forged
		// "applied" event would make maintctl report a change that never happened.
		d = append(d, KVSubjects...)
		d = append(d, domain.EventPrefix+">", domain.DLQPrefix+">", domain.NoticePrefix+">")
		// Nor the policies in force: a policy takes effect only through a policy command.
		d = append(d, domain.PoliciesFilter)
	}
	if r != RoleAdmin {
		// Only an admin's replay sends a webhook delivery again.
		d = append(d, domain.WebhookReplayPrefix+">")
	}
	if r == RoleFunction || r == RoleReader {
		d = append(d, domain.CommandPrefix+">", domain.PolicyPrefix+">")
	}
	if r == RoleCampaign {
		// It announces and withdraws windows; a customer's policy is not its to set.
		d = append(d, domain.PolicyPrefix+">")
	}
	if r != RoleAdmin {
		d = append(d, api+"STREAM.MSG.DELETE."+domain.DLQStream)
	}
	return append(d, subscriptionDenied(r)...)
}
