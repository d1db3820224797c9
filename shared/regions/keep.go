package regions

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// The hub's sources and their keeper. nats-server retries a source it cannot reach with a
// growing back-off (10 s more at each failure, up to 2 minutes), so a region back after a
// long cut would wait that long to be fresh again. The keeper asks, every KeepEvery, whether
// each silent source's region answers on its JetStream API, and when it does, takes the
// source out of the stream and puts it back: NATS then sets it up at once, from where it
// stopped (the stream knows the last sequence it copied). Nothing is copied by the keeper.
const (
	KeepEvery = time.Second
	// silentAfter: a live source hears a heartbeat every second.
	silentAfter = 3 * time.Second
	// nudgeEvery bounds how often one region's source is set up again.
	nudgeEvery = 5 * time.Second
	// probeTimeout bounds the question to a region.
	probeTimeout = time.Second
)

// Keeper keeps the hub's sources flowing (see above).
type Keeper struct {
	JS     jetstream.JetStream
	Log    *slog.Logger
	nudged map[string]time.Time
}

// Run keeps the sources until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	k.nudged = map[string]time.Time{}
	t := time.NewTicker(KeepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := k.Once(ctx); err != nil && ctx.Err() == nil {
				k.Log.Warn("hub sources not checked; trying again", "err", err)
			}
		}
	}
}

// Once checks every source once and sets up again those silent whose region answers.
func (k *Keeper) Once(ctx context.Context) error {
	if k.nudged == nil {
		k.nudged = map[string]time.Time{}
	}
	s, err := k.JS.Stream(ctx, domain.RegionsStream)
	if err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	info := s.CachedInfo()
	for _, src := range info.Sources {
		if src.External == nil || src.Error == nil && src.Active >= 0 && src.Active < silentAfter {
			continue
		}
		r, ok := domain.RegionOfAPIPrefix(src.External.APIPrefix)
		if !ok || time.Since(k.nudged[r]) < nudgeEvery || !k.answers(ctx, r) {
			continue
		}
		k.nudged[r] = time.Now()
		if err := k.resource(ctx, info.Config, r); err != nil {
			return err
		}
		k.Log.Info("region answers again; its source set up anew", "region", r)
	}
	return nil
}

// answers reports whether the region's JetStream answers through the hub.
func (k *Keeper) answers(ctx context.Context, region string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	rjs, err := jetstream.NewWithDomain(k.JS.Conn(), region)
	if err != nil {
		return false
	}
	_, err = rjs.Stream(ctx, domain.SummaryStream)
	return err == nil
}

// resource takes the region's source out of the stream of cfg and puts it back.
func (k *Keeper) resource(ctx context.Context, cfg jetstream.StreamConfig, region string) error {
	prefix := domain.RegionAPIPrefix(region)
	without := cfg
	without.Sources = slices.DeleteFunc(slices.Clone(cfg.Sources), func(s *jetstream.StreamSource) bool {
		return s.External != nil && s.External.APIPrefix == prefix
	})
	if _, err := k.JS.UpdateStream(ctx, without); err != nil {
		return fmt.Errorf("keeper: source of %s out: %w", region, err)
	}
	if _, err := k.JS.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("keeper: source of %s back: %w", region, err)
	}
	return nil
}
