package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// ErrRegionUnreachable is wrapped when a region's JetStream does not answer through the hub:
// its link is cut, it is down, or the hub does not know it.
var ErrRegionUnreachable = errors.New("unreachable")

// InRegion is a client of the same connection that reads from the region's domain (README,
// Regions): on the hub, the region's records, read where they are kept, never copied.
func (c *Client) InRegion(region string) (*Client, error) {
	if err := domain.ValidRegion(region); err != nil {
		return nil, err
	}
	js, err := jetstream.NewWithDomain(c.NC, region)
	if err != nil {
		return nil, fmt.Errorf("region %s: %w", region, err)
	}
	return &Client{NC: c.NC, JS: js, Conn: c.Conn, log: c.log, scopes: c.scopes, pub: js}, nil
}

// RegionError says that region is unreachable when err is what an unanswered request through
// the hub gives (no responder, no answer in time, no stream answering); otherwise err.
func RegionError(region string, err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, ErrNotProvisioned) {
		return fmt.Errorf("region %s %w: %w", region, ErrRegionUnreachable, err)
	}
	return err
}
