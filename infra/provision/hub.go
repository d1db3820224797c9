package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
	"maintsignals/shared/regions"
)

// HubConfig is what the hub provisions (README, Regions): the stream that sources every
// region's summaries.
type HubConfig struct {
	// Regions are the regions' names, each a JetStream domain joined to the hub.
	Regions  []string
	Replicas int
}

// RegionsStream is the hub's stream of every region's summaries, sourced from each region's
// domain through its JetStream API: a region the link cannot reach only delays its own
// source. A few ticks of each shard are enough, as only the newest counts.
func RegionsStream(c HubConfig) jetstream.StreamConfig {
	sc := jetstream.StreamConfig{
		Name:              domain.RegionsStream,
		Description:       "Maintenance-signal summaries of every region, sourced from each region's " + domain.SummaryStream,
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 10,
		MaxAge:            24 * time.Hour,
		Duplicates:        DefaultConfig().DuplicateWindow,
		Storage:           jetstream.FileStorage,
		Replicas:          max(c.Replicas, 1),
	}
	for _, r := range c.Regions {
		sc.Sources = append(sc.Sources, &jetstream.StreamSource{
			Name: domain.SummaryStream,
			// A region's summaries only: one that published another's name would not mix in.
			FilterSubject: domain.SummaryPrefix + r + ".>",
			External:      &jetstream.ExternalStream{APIPrefix: domain.RegionAPIPrefix(r)},
		})
	}
	return sc
}

// Hub creates or updates the hub's stream; a region added or removed changes its sources.
func Hub(ctx context.Context, js jetstream.JetStream, c HubConfig) (Change, error) {
	for _, r := range c.Regions {
		if err := domain.ValidRegion(r); err != nil {
			return Change{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	want := RegionsStream(c)
	ch := Change{Kind: "stream", Name: want.Name}
	s, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = js.CreateStream(ctx, want)
		ch.Action = Created
	case err != nil:
	case slices.Equal(regions.SourceRegions(s.CachedInfo().Config.Sources), c.Regions) && s.CachedInfo().Config.Replicas == want.Replicas:
		ch.Action = Unchanged
	default:
		_, err = js.UpdateStream(ctx, want)
		ch.Action, ch.Fields = Updated, []string{"sources"}
	}
	if err != nil {
		ch.Action, ch.Err = Failed, err
		return ch, fmt.Errorf("hub stream %s: %w", want.Name, err)
	}
	return ch, nil
}
