package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// The layout of the store (README, The layout of the store): where an entity's record, events
// and notices live. Two needs shaped it.
//
//   - Tenants (a subscription, or a resource group in one) are confined by the server, whose
//     permissions and consumer filters match whole subject tokens. So every subject and bucket
//     key of an entity starts with its tenant tokens, <subscription>.<resource group>, ahead of
//     the key (which stays one token: the key of §3, `maintctl key`).
//   - No stream may pass nats-server's high-cardinality threshold (HighCardinalityThreshold
//     subjects or interior deletes) at a fleet of a million. So the fleet is split into Cells
//     cells by a hash of the key, each with its own records bucket, events stream and notices
//     stream: a cell holds an eighth of the fleet, and an emitter or notices shard reads only
//     its cells.
//
// The first layout (one bucket "maintenance", subjects maint.evt.<key>, maint.notice.<key>) is
// moved into this one by `maintctl provision` (infra/provision, migrate.go).
const (
	// Cells is the number of cells. It is fixed, so that every reader finds an entity without
	// asking the server; an emitter or notices shard count divides it.
	Cells = 8
	// LayoutVersion is the version of the layout, kept in the records buckets' metadata.
	LayoutVersion = 2
	// NoToken stands for a tenant token a resource ID does not have (an ID outside
	// /subscriptions/<id>/resourceGroups/<name>/…).
	NoToken = "_"

	// RecordsBucketPrefix + <cell> names a cell's records bucket.
	RecordsBucketPrefix = Bucket + "-c"
	// EventsStreamPrefix + <cell> names a cell's events stream; NoticesStreamPrefix its
	// notices stream.
	EventsStreamPrefix  = EventsStream + "_C"
	NoticesStreamPrefix = NoticesStream + "_C"
	// MetaLayout is the metadata key, on a cell's bucket and streams, of the layout version.
	MetaLayout = "maintsignals.layout"
)

// Cell is one eighth of the fleet: the entities whose KeyHash is Cell modulo Cells.
type Cell int

// CellOf is the cell of an entity key.
func CellOf(key string) Cell { return Cell(KeyHash(key) % Cells) }

// AllCells lists the cells, in order.
func AllCells() []Cell {
	cs := make([]Cell, Cells)
	for i := range cs {
		cs[i] = Cell(i)
	}
	return cs
}

// String is the cell's token in subjects and names.
func (c Cell) String() string { return strconv.Itoa(int(c)) }

// RecordsBucket is the cell's records bucket, and RecordsStream its stream.
func (c Cell) RecordsBucket() string { return RecordsBucketPrefix + c.String() }
func (c Cell) RecordsStream() string { return "KV_" + c.RecordsBucket() }

// EventsStream and NoticesStream are the cell's streams of entity events and notices.
func (c Cell) EventsStream() string  { return EventsStreamPrefix + c.String() }
func (c Cell) NoticesStream() string { return NoticesStreamPrefix + c.String() }

// EventsSubjects and NoticesSubjects are the subjects of the cell's streams.
func (c Cell) EventsSubjects() string  { return EventPrefix + c.String() + ".>" }
func (c Cell) NoticesSubjects() string { return NoticePrefix + c.String() + ".>" }

// Entity events and notices of every cell, as one filter each (a core subscription, a
// permission); a cell's stream holds those of its own cell.
const (
	AllEventsFilter  = EventPrefix + "*.*.*.*"
	AllNoticesFilter = NoticePrefix + "*.*.*.*"
)

// EventsStreams and NoticesStreams list the cells' streams of events and notices.
func EventsStreams() []string  { return cellNames(Cell.EventsStream) }
func NoticesStreams() []string { return cellNames(Cell.NoticesStream) }

func cellNames(name func(Cell) string) []string {
	out := make([]string, Cells)
	for c := range Cells {
		out[c] = name(Cell(c))
	}
	return out
}

// ScopeFilter is the filter, in a cell's stream of subjects prefix.<cell>.<located key>, of
// the entities a prefix selects: the whole cell for the zero prefix, a tenant's tokens for a
// subscription or resource group, the one subject of an entity key, and otherwise the
// subscription's tokens (the caller keeps the entities the prefix covers).
func (c Cell) ScopeFilter(prefix string, p Prefix) string {
	base := prefix + c.String() + "."
	if p.Key == "" {
		return base + ">"
	}
	if s, err := ParseScope(p.ID); err == nil {
		return base + s.Tokens()
	}
	t := TenantOf(p.Key)
	if t.Subscription == NoToken {
		return base + ">"
	}
	return base + t.Subscription + ".>"
}

// Cells returns the cells a shard reads: those whose number is the shard's index modulo the
// shard count (which divides Cells).
func (s Shard) Cells() []Cell {
	var cs []Cell
	for c := range Cells {
		if s.Of <= 1 || c%s.Of == s.Index {
			cs = append(cs, Cell(c))
		}
	}
	return cs
}

// Tenant is an entity's tenant tokens: its subscription and resource group as they appear in
// its key, NoToken where the ID has none.
type Tenant struct {
	Subscription, Group string
}

// TenantOf reads the tenant tokens from an entity key
// (subscriptions/<sub>/resourcegroups/<group>/…).
func TenantOf(key string) Tenant {
	t := Tenant{Subscription: NoToken, Group: NoToken}
	rest, ok := strings.CutPrefix(key, "subscriptions/")
	if !ok {
		return t
	}
	sub, rest, _ := strings.Cut(rest, "/")
	if sub == "" {
		return t
	}
	t.Subscription = sub
	rest, ok = strings.CutPrefix(rest, "resourcegroups/")
	if !ok {
		return t
	}
	if group, _, _ := strings.Cut(rest, "/"); group != "" {
		t.Group = group
	}
	return t
}

// Located is an entity key with its tenant tokens in front, <subscription>.<group>.<key>: the
// key of its record in its cell's bucket, and the tail of its event and notice subjects.
func Located(key string) string {
	t := TenantOf(key)
	return t.Subscription + "." + t.Group + "." + key
}

// RecordSubject is the subject of an entity's record in its cell's bucket.
func RecordSubject(key string) string {
	return "$KV." + CellOf(key).RecordsBucket() + "." + Located(key)
}

// EventStreamOf and NoticeStreamOf are the streams that hold an entity's events and notices.
func EventStreamOf(key string) string  { return CellOf(key).EventsStream() }
func NoticeStreamOf(key string) string { return CellOf(key).NoticesStream() }

// Scope is the tenant a customer user or token is confined to: a subscription, or a
// resource group in one (README, Tenants).
type Scope struct {
	Prefix Prefix
	Tenant Tenant // Group is NoToken for a whole subscription
}

// ErrInvalidScope is wrapped by every scope that is not a subscription or a resource group.
var ErrInvalidScope = fmt.Errorf("invalid scope")

// ParseScope reads a scope: /subscriptions/<id> or /subscriptions/<id>/resourceGroups/<name>.
func ParseScope(s string) (Scope, error) {
	p, err := ParsePrefixLoose(s)
	if err != nil {
		return Scope{}, fmt.Errorf("%w: %w", ErrInvalidScope, err)
	}
	segs := strings.Split(p.Key, "/")
	ok := len(segs) == 2 && segs[0] == "subscriptions" ||
		len(segs) == 4 && segs[0] == "subscriptions" && segs[2] == "resourcegroups"
	if !ok {
		return Scope{}, fmt.Errorf("%w: %q is not /subscriptions/<id> or /subscriptions/<id>/resourceGroups/<name>", ErrInvalidScope, truncate(s, 80))
	}
	t := Tenant{Subscription: segs[1], Group: NoToken}
	if len(segs) == 4 {
		t.Group = segs[3]
	}
	if t.Subscription == NoToken || t.Group == NoToken && len(segs) == 4 {
		return Scope{}, fmt.Errorf("%w: %q names no tenant", ErrInvalidScope, truncate(s, 80))
	}
	return Scope{Prefix: p, Tenant: t}, nil
}

// Tokens is the scope as the leading tokens of a located key, with a wildcard for what it
// leaves open: "<sub>.>" or "<sub>.<group>.>". Permissions and consumer filters append it to
// a subject's fixed part.
func (s Scope) Tokens() string {
	if s.Tenant.Group == NoToken {
		return s.Tenant.Subscription + ".>"
	}
	return s.Tenant.Subscription + "." + s.Tenant.Group + ".>"
}

// Covers reports whether the entity of key lies in the scope.
func (s Scope) Covers(key string) bool { return s.Prefix.Covers(key) }

// Disjoint drops the scopes another of them covers (and repeats): what a reader confined to
// them reads once each.
func Disjoint(scopes []Scope) []Scope {
	var out []Scope
	for i, s := range scopes {
		covered := false
		for j, o := range scopes {
			if i != j && o.Covers(s.Prefix.Key) && (o.Prefix.Key != s.Prefix.Key || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}

// CellsOf is the cells the shards read, in order, each once.
func CellsOf(shards []Shard) []Cell {
	var in [Cells]bool
	for _, s := range shards {
		for _, c := range s.Cells() {
			in[c] = true
		}
	}
	var cs []Cell
	for c, ok := range in {
		if ok {
			cs = append(cs, Cell(c))
		}
	}
	return cs
}
