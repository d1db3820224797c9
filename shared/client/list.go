package client

import (
	"context"
	"errors"
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
	// Prefix keeps the entities whose resource ID starts with it, compared case-insensitively
	// as IDs are ("/subscriptions/0b1f/resourceGroups/rg-1/").
	Prefix string
	// Updating keeps the entities with an update in progress.
	Updating bool
	// WindowBefore, when set, keeps the entities whose announced window starts before it.
	WindowBefore time.Time
	// Forgotten also keeps the entities a Forget took out of the signal (their tombstones),
	// which a listing otherwise leaves out.
	Forgotten bool
}

// Match reports whether the filter keeps e.
func (f ListFilter) Match(e Entity) bool {
	r := e.Record
	switch {
	case r.Forgotten() && !f.Forgotten:
		return false
	case f.State != "" && r.State != f.State:
		return false
	case f.Updating && !r.Updating:
		return false
	case !f.WindowBefore.IsZero() && (r.Window == nil || !r.Window.Start.Before(f.WindowBefore)):
		return false
	}
	return f.Prefix == "" || hasPrefixFold(r.ResourceID, f.Prefix)
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
	var l Listing
	err := c.Scan(ctx, func(e Entity, err error) error {
		if err != nil {
			if errors.Is(err, store.ErrCorruptRecord) {
				l.Corrupt++
				c.log.Warn("skipping a record that does not decode", "key", e.Key, "error", err)
				return nil
			}
			return err
		}
		if f.Match(e) {
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
// reads the bucket until it has max or ctx ends, and returns what it found by then.
func (c *Client) CompleteIDs(ctx context.Context, prefix string, max int) ([]string, error) {
	var ids []string
	errFull := errors.New("enough")
	f := ListFilter{Prefix: prefix}
	err := c.Scan(ctx, func(e Entity, err error) error {
		if err == nil && f.Match(e) {
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
