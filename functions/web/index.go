package web

import (
	"strings"
	"sync"
	"time"

	"github.com/tidwall/btree"

	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/policy"
)

// The fleet index: what a replica keeps of every record of the bucket, so that the fleet page
// answers from memory at a million entities. It is fed by one watch of the bucket (follow) and
// holds a compact summary per entity, in key order (a resource-ID prefix is a key range), once
// more per state (a filtered page is a range of that state's tree), the windows by start (the
// time line) and the counts that the top of the page shows. Facts that time changes (overdue,
// stuck, conflict) are ordered sets by the instant each starts or ends (domain.Record.OverdueFrom,
// StuckFrom, policy.ConflictUntil: the one definition of each), read up to now, so nothing has
// to be recomputed as the clock moves.

// entry is the summary of one entity: the record's shown fields (fleet.Record), without what
// it keeps for exactly-once handling. Times are Unix nanoseconds (0: none).
type entry struct {
	key string
	// disp gives back the resource ID as first seen from the key (see displayOf).
	disp        string
	campaign    string // interned
	generation  int
	reason      string // interned: a campaign's windows share theirs
	lastErr     string // interned
	lastCmdID   string
	lastCmdSeq  uint64
	rev         uint64
	since       int64
	updated     int64
	lastCmdAt   int64
	winStart    int64
	winEnd      int64
	overdueFrom int64 // domain.Record.OverdueFrom (0: never)
	stuckFrom   int64 // domain.Record.StuckFrom (0: never)
	// conflictUntil is the end of the entity's conflict with the policy in force
	// (policy.ConflictUntil; 0: none).
	conflictUntil int64
	version       int32
	state         uint8 // index in domain.States
	task          uint8 // index in domain.Tasks + 1; 0: none
	updating      bool
	hasWindow     bool
}

// timed orders entries by a time, then by key.
type timed struct {
	at int64
	e  *entry
}

func lessTimed(a, b timed) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.e.key < b.e.key
}

func lessEntry(a, b *entry) bool { return a.key < b.key }

// tree is a B-tree without locks of its own (the index has one), with counts in its nodes:
// the position of a key, and so the number of keys in a range, is found without walking it.
func tree[T any](less func(a, b T) bool) *btree.BTreeG[T] {
	return btree.NewBTreeGOptions(less, btree.Options{Degree: 32, NoLocks: true})
}

// index is the fleet as a replica sees it. Its methods are safe for concurrent use.
type index struct {
	mu         sync.RWMutex
	all        *btree.BTreeG[*entry]
	byState    []*btree.BTreeG[*entry] // by index in domain.States
	overdueAt  *btree.BTreeG[timed]    // by overdueFrom: overdue from then on
	stuckAt    *btree.BTreeG[timed]    // by stuckFrom: stuck from then on
	conflictTo *btree.BTreeG[timed]    // by conflictUntil: in conflict until then
	byStart    *btree.BTreeG[timed]    // every window, by its start: the time line
	startsHour map[int64]int           // window starts per Unix hour
	updating   int
	policies   fleet.Policies
	intern     map[string]string
	stuckAfter time.Duration
}

func newIndex(stuckAfter time.Duration) *index {
	x := &index{stuckAfter: stuckAfter, policies: fleet.Policies{}}
	x.clear()
	return x
}

// clear empties the fleet (the policies stay: they are followed apart).
func (x *index) clear() {
	x.all = tree(lessEntry)
	x.byState = make([]*btree.BTreeG[*entry], len(domain.States))
	for i := range x.byState {
		x.byState[i] = tree(lessEntry)
	}
	x.overdueAt = tree(lessTimed)
	x.stuckAt = tree(lessTimed)
	x.conflictTo = tree(lessTimed)
	x.byStart = tree(lessTimed)
	x.startsHour = map[int64]int{}
	x.updating = 0
	x.intern = map[string]string{}
}

// resetWhere drops the keys that in accepts, before they are read again from the start (one
// cell's records).
func (x *index) resetWhere(in func(key string) bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var drop []*entry
	x.all.Scan(func(e *entry) bool {
		if in(e.key) {
			drop = append(drop, e)
		}
		return true
	})
	for _, e := range drop {
		x.remove(e.key)
	}
}

// put sets the summary of key from its record at revision rev; a forgotten entity's record
// takes it out, as a deleted key does.
func (x *index) put(key string, rev uint64, r domain.Record) {
	if r.Forgotten() {
		x.remove(key)
		return
	}
	// A new entry, never the old one changed: the trees of an API walk's snapshot
	// (snapshot.go) still hold the old one.
	e := new(entry)
	*e = x.summarize(key, rev, r)
	if old, ok := x.all.Set(e); ok {
		x.unlink(old)
	}
	x.link(e)
}

// remove drops key (deleted or purged from the bucket).
func (x *index) remove(key string) {
	if old, ok := x.all.Delete(&entry{key: key}); ok {
		x.unlink(old)
	}
}

func (x *index) summarize(key string, rev uint64, r domain.Record) entry {
	e := entry{key: key, disp: displayOf(key, r.ResourceID), rev: rev, since: nanos(r.StateSince),
		updated: nanos(r.UpdatedAt), lastCmdAt: nanos(r.LastCommandAt), state: stateIndex(r.State), task: taskIndex(r.Task),
		updating: r.Updating, lastErr: x.interned(r.LastError), reason: x.interned(r.Reason),
		lastCmdID: r.LastCommandID, lastCmdSeq: r.LastCommandSeq, version: int32(r.Version)}
	if r.Window != nil {
		e.hasWindow, e.winStart, e.winEnd = true, r.Window.Start.UnixNano(), r.Window.End.UnixNano()
	}
	if r.Campaign != nil {
		e.campaign, e.generation = x.interned(r.Campaign.ID), r.Campaign.Generation
	}
	if t, ok := r.OverdueFrom(); ok {
		e.overdueFrom = t.UnixNano()
	}
	if t, ok := r.StuckFrom(x.stuckAfter); ok {
		e.stuckFrom = t.UnixNano()
	}
	e.conflictUntil = x.conflictUntil(&e)
	return e
}

// record gives back the record the entry summarises (its shown fields).
func (e *entry) record() domain.Record {
	r := domain.Record{ResourceID: e.resourceID(), State: domain.States[e.state], Updating: e.updating,
		Task: e.taskName(), LastError: e.lastErr, Reason: e.reason, StateSince: timeOf(e.since),
		UpdatedAt: timeOf(e.updated), LastCommandID: e.lastCmdID, LastCommandSeq: e.lastCmdSeq,
		LastCommandAt: timeOf(e.lastCmdAt), Version: int(e.version)}
	if e.hasWindow {
		r.Window = &domain.Window{Start: timeOf(e.winStart), End: timeOf(e.winEnd)}
	}
	if e.campaign != "" {
		r.Campaign = &domain.CampaignRef{ID: e.campaign, Generation: e.generation}
	}
	return r
}

func (x *index) interned(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := x.intern[s]; ok {
		return v
	}
	x.intern[s] = s
	return s
}

// link adds e to the secondary orders and counts.
func (x *index) link(e *entry) {
	x.byState[e.state].Set(e)
	if e.overdueFrom != 0 {
		x.overdueAt.Set(timed{e.overdueFrom, e})
	}
	if e.updating {
		x.updating++
	}
	if e.stuckFrom != 0 {
		x.stuckAt.Set(timed{e.stuckFrom, e})
	}
	if e.hasWindow {
		x.byStart.Set(timed{e.winStart, e})
		x.startsHour[hourOf(e.winStart)]++
	}
	if e.conflictUntil != 0 {
		x.conflictTo.Set(timed{e.conflictUntil, e})
	}
}

// unlink removes e from the secondary orders and counts.
func (x *index) unlink(e *entry) {
	x.byState[e.state].Delete(e)
	if e.overdueFrom != 0 {
		x.overdueAt.Delete(timed{e.overdueFrom, e})
	}
	if e.updating {
		x.updating--
	}
	if e.stuckFrom != 0 {
		x.stuckAt.Delete(timed{e.stuckFrom, e})
	}
	if e.hasWindow {
		x.byStart.Delete(timed{e.winStart, e})
		h := hourOf(e.winStart)
		if x.startsHour[h]--; x.startsHour[h] <= 0 {
			delete(x.startsHour, h)
		}
	}
	if e.conflictUntil != 0 {
		x.conflictTo.Delete(timed{e.conflictUntil, e})
	}
}

// clearPolicies forgets every policy (before the policies are read again).
func (x *index) clearPolicies() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.policies = fleet.Policies{}
	x.conflictTo.Scan(func(t timed) bool {
		t.e.conflictUntil = 0
		return true
	})
	x.conflictTo = tree(lessTimed)
}

// conflictUntil is the end of e's conflict with the policy in force as the index holds it
// (policy.ConflictUntil), 0 when there is none.
func (x *index) conflictUntil(e *entry) int64 {
	if e.state != statePending || !e.hasWindow || len(x.policies) == 0 {
		return 0 // the common case, without building the record
	}
	in := x.policies.For(e.key)
	if in.Policy == nil {
		return 0
	}
	if why, until := policy.ConflictUntil(e.record(), in.Policy, in.Since); why != "" {
		return until.UnixNano()
	}
	return 0
}

// setPolicy sets (in non-nil) or deletes the policy of scope key, and judges again the
// entities it covers.
func (x *index) setPolicy(scopeKey string, in *fleet.InForce) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if in == nil {
		delete(x.policies, scopeKey)
	} else {
		x.policies[scopeKey] = *in
	}
	x.all.Ascend(&entry{key: scopeKey}, func(e *entry) bool {
		if !strings.HasPrefix(e.key, scopeKey) {
			return false
		}
		if domain.KeyUnder(e.key, scopeKey) {
			if c := x.conflictUntil(e); c != e.conflictUntil {
				if e.conflictUntil != 0 {
					x.conflictTo.Delete(timed{e.conflictUntil, e})
				}
				if e.conflictUntil = c; c != 0 {
					x.conflictTo.Set(timed{c, e})
				}
			}
		}
		return true
	})
}

// inForce is the policy in force for key, if any, and since when.
func (x *index) inForce(key string) fleet.InForce {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.policies.For(key)
}

// apply runs the changes of one batch of the watch under one lock.
func (x *index) apply(batch []change, decode func([]byte) (domain.Record, error)) (bad int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range batch {
		if c.deleted {
			x.remove(c.key)
			continue
		}
		r, err := decode(c.value)
		if err != nil {
			bad++
			continue
		}
		x.put(c.key, c.rev, r)
	}
	return bad
}

var statePending = stateIndex(domain.StatePending)

func stateIndex(s domain.State) uint8 {
	for i, v := range domain.States {
		if v == s {
			return uint8(i)
		}
	}
	return 0
}

func taskIndex(t domain.Task) uint8 {
	for i, v := range domain.Tasks {
		if v == t {
			return uint8(i + 1)
		}
	}
	return 0
}

func (e *entry) taskName() domain.Task {
	if e.task == 0 {
		return ""
	}
	return domain.Tasks[e.task-1]
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func hourOf(n int64) int64 { return floorDiv(n, int64(time.Hour)) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
