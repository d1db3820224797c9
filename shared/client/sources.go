package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// source is what a read takes from one stream: its messages under filter.
type source struct{ stream, filter string }

// eventSources are where the outcome events of resourceID are ("" for every entity, of the
// client's scopes if it has any: every cell's stream, filtered on them).
func (c *Client) eventSources(resourceID string) ([]source, error) {
	return c.cellSources(resourceID, domain.EventPrefix, domain.EventStreamOf, domain.EventSubject, domain.Cell.EventsStream)
}

// noticeSources are where the notices of resourceID are ("" for every entity).
func (c *Client) noticeSources(resourceID string) ([]source, error) {
	return c.cellSources(resourceID, domain.NoticePrefix, domain.NoticeStreamOf, domain.NoticeSubject, domain.Cell.NoticesStream)
}

func (c *Client) cellSources(resourceID, prefix string, stream, subject func(string) string, cellStream func(domain.Cell) string) ([]source, error) {
	if resourceID == "" {
		scopes := []domain.Prefix{{}}
		if len(c.scopes) > 0 {
			scopes = scopes[:0]
			for _, s := range c.scopes {
				scopes = append(scopes, s.Prefix)
			}
		}
		var out []source
		for _, cell := range domain.AllCells() {
			for _, p := range scopes {
				out = append(out, source{cellStream(cell), cell.ScopeFilter(prefix, p)})
			}
		}
		return out, nil
	}
	key, err := domain.Key(resourceID)
	if err != nil {
		return nil, err
	}
	if err := c.permits(resourceID, key); err != nil {
		return nil, err
	}
	return []source{{stream(key), subject(key)}}, nil
}

// permits fails with ErrNotPermitted for an entity outside the client's scopes (when it has
// any): the server would refuse the read.
func (c *Client) permits(resourceID, key string) error {
	if len(c.scopes) > 0 && !slices.ContainsFunc(c.scopes, func(s domain.Scope) bool { return s.Covers(key) }) {
		return fmt.Errorf("%w: %s is outside your scopes", ErrNotPermitted, resourceID)
	}
	return nil
}

// eachStoredIn calls fn with every message of the sources (stored since then, when since is
// set), in the order the server stored them across the sources, in one pass that ends at what
// each held when it starts: one ordered consumer per source, read in step.
func (c *Client) eachStoredIn(ctx context.Context, srcs []source, since time.Time, what string, fn func(data []byte, seq uint64) error) error {
	if len(srcs) == 1 {
		return c.eachStored(ctx, srcs[0].stream, srcs[0].filter, since, what, fn)
	}
	type head struct {
		it   jetstream.MessagesContext
		left uint64
		msg  jetstream.Msg
		md   *jetstream.MsgMetadata
	}
	var heads []*head
	defer func() {
		for _, h := range heads {
			h.it.Stop()
		}
	}()
	for _, s := range srcs {
		it, n, err := c.readStream(ctx, s.stream, s.filter, since, what)
		if err != nil {
			return err
		}
		if it != nil {
			heads = append(heads, &head{it: it, left: n})
		}
	}
	for {
		var best *head
		for _, h := range heads {
			if h.msg == nil && h.left > 0 {
				msg, err := h.it.Next(jetstream.NextContext(ctx))
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				md, err := msg.Metadata()
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				h.msg, h.md = msg, md
				if h.left--; md.NumPending == 0 {
					h.left = 0
				}
			}
			if h.msg != nil && (best == nil || h.md.Timestamp.Before(best.md.Timestamp)) {
				best = h
			}
		}
		if best == nil {
			return nil
		}
		msg, seq := best.msg, best.md.Sequence.Stream
		best.msg, best.md = nil, nil
		if err := fn(msg.Data(), seq); err != nil {
			return err
		}
	}
}

// readStream opens an ordered consumer on stream under filter, from since (all when zero),
// and returns its messages and how many it had to deliver; nil when none.
func (c *Client) readStream(ctx context.Context, stream, filter string, since time.Time, what string) (jetstream.MessagesContext, uint64, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := c.JS.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, notProvisioned(err))
	}
	n := cons.CachedInfo().NumPending
	if n == 0 {
		return nil, 0, nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	return it, n, nil
}
