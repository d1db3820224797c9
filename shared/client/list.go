package client

import (
	"context"
	"errors"
	"sort"
	"strings"

	"maintsignals/shared/domain"
	"maintsignals/shared/store"
)

// Listing is every tracked entity of a List, sorted by resource ID (compared
// case-insensitively), and how many records were skipped because they do not decode.
type Listing struct {
	Entities []Entity
	Corrupt  int
}

// List reads every record in one streaming pass over the bucket and keeps the entities in
// state (every one when state is ""). A record that does not decode is skipped, logged and
// counted, so that one bad record does not hide the fleet.
func (c *Client) List(ctx context.Context, state domain.State) (Listing, error) {
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
		if state == "" || e.Record.State == state {
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
