package web

import (
	"strings"
	"sync"
	"time"

	"github.com/tidwall/btree"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// The fleet index: what a replica keeps of every record of the bucket, so that the fleet page
// answers from memory at a million entities. It is fed by one watch of the bucket (follow) and
// holds a compact summary per entity, in key order (a resource-ID prefix is a key range), once
// more per state (a filtered page is a range of that state's tree), the windows by start (the
// time line) and the counts that the top of the page shows. Times that pass (overdue, stuck)
// are ordered sets read up to now, so nothing has to be recomputed as the clock moves.

// entry is the summary of one entity. Times are Unix nanoseconds (0: none).
type entry struct {
	key string
	// disp gives back the resource ID as first seen from the key (see displayOf).
	disp       string
	campaign   string // interned
	rev        uint64
	since      int64
	updated    int64
	winStart   int64
	winEnd     int64
	state      uint8 // index in domain.States
	task       uint8 // index in domain.Tasks + 1; 0: none
	updating   bool
	conflict   bool // Pending, with a window the policy in force does not allow
	hasWindow  bool
	hasLastErr bool
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
	pendingEnd *btree.BTreeG[timed]    // Pending with a window, by the window's end: overdue
	updatingAt *btree.BTreeG[timed]    // updating, by updatedAt: stuck
	byStart    *btree.BTreeG[timed]    // every window, by its start: the time line
	startsHour map[int64]int           // window starts per Unix hour
	conflicts  int
	updating   int
	policies   map[string]*policy.Policy // by scope key
	intern     map[string]string
	stuckAfter time.Duration
}

func newIndex(stuckAfter time.Duration) *index {
	x := &index{stuckAfter: stuckAfter, policies: map[string]*policy.Policy{}}
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
	x.pendingEnd = tree(lessTimed)
	x.updatingAt = tree(lessTimed)
	x.byStart = tree(lessTimed)
	x.startsHour = map[int64]int{}
	x.conflicts, x.updating = 0, 0
	x.intern = map[string]string{}
}

// reset empties the fleet before it is read again from the start.
func (x *index) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clear()
}

// put sets the summary of key from its record at revision rev.
func (x *index) put(key string, rev uint64, r domain.Record) {
	n := x.summarize(key, rev, r)
	if old, ok := x.all.Get(&entry{key: key}); ok {
		x.unlink(old)
		*old = n
		x.link(old)
		return
	}
	e := &n
	x.all.Set(e)
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
		updated: nanos(r.UpdatedAt), state: stateIndex(r.State), task: taskIndex(r.Task),
		updating: r.Updating, hasLastErr: r.LastError != ""}
	if r.Window != nil {
		e.hasWindow, e.winStart, e.winEnd = true, r.Window.Start.UnixNano(), r.Window.End.UnixNano()
	}
	if r.Campaign != nil {
		e.campaign = x.interned(r.Campaign.ID)
	}
	e.conflict = x.conflicting(&e)
	return e
}

func (x *index) interned(s string) string {
	if v, ok := x.intern[s]; ok {
		return v
	}
	x.intern[s] = s
	return s
}

// link adds e to the secondary orders and counts.
func (x *index) link(e *entry) {
	x.byState[e.state].Set(e)
	if e.state == statePending && e.hasWindow {
		x.pendingEnd.Set(timed{e.winEnd, e})
	}
	if e.updating {
		x.updating++
		x.updatingAt.Set(timed{e.updated, e})
	}
	if e.hasWindow {
		x.byStart.Set(timed{e.winStart, e})
		x.startsHour[hourOf(e.winStart)]++
	}
	if e.conflict {
		x.conflicts++
	}
}

// unlink removes e from the secondary orders and counts.
func (x *index) unlink(e *entry) {
	x.byState[e.state].Delete(e)
	if e.state == statePending && e.hasWindow {
		x.pendingEnd.Delete(timed{e.winEnd, e})
	}
	if e.updating {
		x.updating--
		x.updatingAt.Delete(timed{e.updated, e})
	}
	if e.hasWindow {
		x.byStart.Delete(timed{e.winStart, e})
		h := hourOf(e.winStart)
		if x.startsHour[h]--; x.startsHour[h] <= 0 {
			delete(x.startsHour, h)
		}
	}
	if e.conflict {
		x.conflicts--
	}
}

// clearPolicies forgets every policy (before the policies are read again).
func (x *index) clearPolicies() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.policies = map[string]*policy.Policy{}
	x.all.Scan(func(e *entry) bool {
		if e.conflict {
			e.conflict = false
			x.conflicts--
		}
		return true
	})
}

// policyFor is the policy in force for key: the most specific scope that covers it.
func (x *index) policyFor(key string) *policy.Policy {
	for _, k := range policy.CandidateKeys(key) {
		if p, ok := x.policies[k]; ok {
			return p
		}
	}
	return nil
}

// conflicting reports whether e is Pending with a window that the policy in force does not
// allow: a policy that changed under an announced window (or a window forced past it).
func (x *index) conflicting(e *entry) bool {
	if e.state != statePending || !e.hasWindow || len(x.policies) == 0 {
		return false
	}
	p := x.policyFor(e.key)
	return p != nil && !p.Allows(domain.Window{Start: time.Unix(0, e.winStart), End: time.Unix(0, e.winEnd)})
}

// setPolicy sets (p non-nil) or deletes the policy of scope key, and judges again the
// entities it covers.
func (x *index) setPolicy(scopeKey string, p *policy.Policy) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p == nil {
		delete(x.policies, scopeKey)
	} else {
		x.policies[scopeKey] = p
	}
	x.all.Ascend(&entry{key: scopeKey}, func(e *entry) bool {
		if !strings.HasPrefix(e.key, scopeKey) {
			return false
		}
		if e.key == scopeKey || strings.HasPrefix(e.key, scopeKey+"/") {
			if c := x.conflicting(e); c != e.conflict {
				e.conflict = c
				if c {
					x.conflicts++
				} else {
					x.conflicts--
				}
			}
		}
		return true
	})
}

// policy returns the policy in force for key, if any.
func (x *index) policy(key string) *policy.Policy {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.policyFor(key)
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
