package web

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/tidwall/btree"
)

// An API walk over the entities (GET /api/v1/entities, page after page) reads the fleet as it
// was at its first page: that page takes a snapshot of the index's trees (a copy-on-write
// copy of each B-tree, constant time; the index then copies the nodes it changes and never
// changes an entry in place), and the walk's page tokens name it. So every entity that matched
// at the first page comes exactly once, whatever commands change meanwhile. A replica keeps
// the snapshots of the walks it began for a while after their last page; a token whose
// snapshot is gone (another replica, a restart, an idle walk) continues over the fleet as it
// is now, after the token's key, in key order: each entity at most once.

// Bounds of the walks a replica remembers.
const (
	walkIdle = 10 * time.Minute
	maxWalks = 64
)

// walk is a walk's snapshot and when it last served a page.
type walk struct {
	trees trees
	used  time.Time
}

// walks are the snapshots of the walks under way. Its methods are safe for concurrent use.
type walks struct {
	mu   sync.Mutex
	byID map[string]*walk
}

func newWalks() *walks { return &walks{byID: map[string]*walk{}} }

// snapshot is a copy of the index's trees as they are now, for a walk to read in its time.
func (x *index) snapshot() trees {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := trees{all: x.all.Copy(), byState: make([]*btree.BTreeG[*entry], len(x.byState))}
	for i, s := range x.byState {
		t.byState[i] = s.Copy()
	}
	return t
}

// keep remembers t as a new walk's snapshot and returns its id; the walk idle the longest
// makes room when there are too many.
func (ws *walks) keep(t trees, now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.expire(now)
	if len(ws.byID) >= maxWalks {
		var oldest string
		for k, w := range ws.byID {
			if oldest == "" || w.used.Before(ws.byID[oldest].used) {
				oldest = k
			}
		}
		delete(ws.byID, oldest)
	}
	ws.byID[id] = &walk{trees: t, used: now}
	return id
}

// find is the snapshot of walk id, if this replica still has it.
func (ws *walks) find(id string, now time.Time) (trees, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.expire(now)
	w, ok := ws.byID[id]
	if !ok {
		return trees{}, false
	}
	w.used = now
	return w.trees, true
}

// end forgets walk id (its last page was served).
func (ws *walks) end(id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.byID, id)
}

func (ws *walks) expire(now time.Time) {
	for k, w := range ws.byID {
		if now.Sub(w.used) > walkIdle {
			delete(ws.byID, k)
		}
	}
}
