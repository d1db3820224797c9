package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// Listing is every tracked entity of a List, sorted by resource ID (compared
// case-insensitively), and how many records were skipped because they do not decode.
type Listing struct {
	Entities []Entity
	Corrupt  int
}

// ListFilter selects the entities of a listing; the zero filter keeps every tracked entity.
type ListFilter struct {
	// State keeps the entities in this state ("": any).
	State domain.State
	// Prefix keeps the entities under a resource-ID prefix (domain.Prefix: it ends at a path
	// segment and compares case-insensitively; one trailing "/" is allowed):
	// "/subscriptions/0b1f/resourceGroups/rg-1" keeps rg-1's entities, not rg-10's.
	Prefix string
	// Updating keeps the entities with an update in progress.
	Updating bool
	// WindowBefore, when set, keeps the entities whose announced window starts before it.
	WindowBefore time.Time
	// Forgotten also keeps the entities a Forget took out of the signal (their tombstones),
	// which a listing otherwise leaves out.
	Forgotten bool
}

// compile checks the filter and returns what keeps an entity.
func (f ListFilter) compile() (func(Entity) bool, error) {
	var p domain.Prefix
	if f.Prefix != "" {
		var err error
		if p, err = domain.ParsePrefixLoose(f.Prefix); err != nil {
			return nil, fmt.Errorf("prefix %q: %w", f.Prefix, err)
		}
	}
	return func(e Entity) bool { return f.match(e, p) }, nil
}

// match reports whether the filter, its prefix read as p, keeps e.
func (f ListFilter) match(e Entity, p domain.Prefix) bool {
	r := e.Record
	switch {
	case r.FenceOnly(): // never seen: a refusal's fence alone
		return false
	case r.Forgotten() && !f.Forgotten:
		return false
	case f.State != "" && r.State != f.State:
		return false
	case f.Updating && !r.Updating:
		return false
	case !f.WindowBefore.IsZero() && (r.Window == nil || !r.Window.Start.Before(f.WindowBefore)):
		return false
	}
	return p.Covers(e.Key)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// List reads every record in one streaming pass over the bucket and keeps the tracked
// entities in state (every one when state is ""), as ListWhere does.
func (c *Client) List(ctx context.Context, state domain.State) (Listing, error) {
	return c.ListWhere(ctx, ListFilter{State: state})
}

// ListWhere reads every record in one streaming pass over the bucket and keeps the entities
// the filter matches. A record that does not decode is skipped, logged and counted, so that one
// bad record does not hide the fleet.
func (c *Client) ListWhere(ctx context.Context, f ListFilter) (Listing, error) {
	match, err := f.compile()
	if err != nil {
		return Listing{}, err
	}
	var l Listing
	err = c.Scan(ctx, func(e Entity, err error) error {
		if err != nil {
			if errors.Is(err, store.ErrCorruptRecord) {
				l.Corrupt++
				c.log.Warn("skipping a record that does not decode", "key", e.Key, "error", err)
				return nil
			}
			return err
		}
		if match(e) {
			l.Entities = append(l.Entities, e)
		}
		return nil
	})
	if err != nil {
		return Listing{}, err
	}
	sort.Slice(l.Entities, func(i, j int) bool {
		return strings.ToLower(l.Entities[i].Record.ResourceID) < strings.ToLower(l.Entities[j].Record.ResourceID)
	})
	return l, nil
}

// CompleteIDs returns the resource IDs of tracked entities that start with prefix (compared
// case-insensitively), sorted, at most max of them: for a shell's completion, which waits. It
// reads the bucket until it has max or ctx ends, and returns what it found by then. What is
// typed so far is a string prefix, not a domain.Prefix: "/subscriptions/0b" completes.
func (c *Client) CompleteIDs(ctx context.Context, prefix string, max int) ([]string, error) {
	var ids []string
	errFull := errors.New("enough")
	err := c.Scan(ctx, func(e Entity, err error) error {
		if err == nil && e.Tracked() && hasPrefixFold(e.Record.ResourceID, prefix) {
			ids = append(ids, e.Record.ResourceID)
		}
		if len(ids) >= max {
			return errFull
		}
		return nil
	})
	sort.Slice(ids, func(i, j int) bool { return strings.ToLower(ids[i]) < strings.ToLower(ids[j]) })
	if errors.Is(err, errFull) || ctx.Err() != nil {
		err = nil
	}
	return ids, err
}
