package command

import (
	"sync"

	"maintsignals/shared/domain"
)

// cache remembers the records this replica wrote, so that the next command of an entity
// starts from them instead of reading the bucket. A remembered record is only a guess: the
// write that follows is a compare-and-swap at its revision, so a record another replica changed
// meanwhile is caught by the bucket (a conflict, then a fresh read). Only a command that the
// guess would apply is decided on it; any other outcome is decided on a fresh read.
type cache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cached
}

type cached struct {
	rec domain.Record
	rev uint64
}

// newCache returns a cache of at most size records; nil (no cache) when size is negative.
func newCache(size int) *cache {
	if size < 0 {
		return nil
	}
	return &cache{max: size, entries: make(map[string]cached)}
}

func (c *cache) get(key string) (domain.Record, uint64, bool) {
	if c == nil {
		return domain.Record{}, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e.rec, e.rev, ok
}

func (c *cache) put(key string, rec domain.Record, rev uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		// Full: forget an arbitrary record. Commands of an entity come in short runs (pending,
		// start, succeeded), so recency matters more than precision here.
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = cached{rec: rec, rev: rev}
}

func (c *cache) forget(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
