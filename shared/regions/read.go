package regions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// ErrNoHub is wrapped when the server holds no hub stream (it is not the hub).
var ErrNoHub = errors.New("no regions here: not the hub (maintctl hub)")

// Read makes the view at now from the hub's stream: the regions its sources name, and the
// newest summary part of each shard. A part that does not decode is logged and left out.
func Read(ctx context.Context, js jetstream.JetStream, now time.Time, log *slog.Logger) (View, error) {
	s, err := js.Stream(ctx, domain.RegionsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return View{}, ErrNoHub
	}
	if err != nil {
		return View{}, fmt.Errorf("regions: %w", err)
	}
	names := SourceRegions(s.CachedInfo().Config.Sources)
	parts, err := newestParts(ctx, js, log)
	if err != nil {
		return View{}, err
	}
	return Combine(names, parts, now), nil
}

// SourceRegions are the regions a hub stream's sources name, in their order.
func SourceRegions(sources []*jetstream.StreamSource) []string {
	out := []string{}
	for _, s := range sources {
		if s.External == nil {
			continue
		}
		if r, ok := domain.RegionOfAPIPrefix(s.External.APIPrefix); ok {
			out = append(out, r)
		}
	}
	return out
}

// newestParts reads the last part stored of every shard of every region.
func newestParts(ctx context.Context, js jetstream.JetStream, log *slog.Logger) ([]domain.Summary, error) {
	cons, err := js.OrderedConsumer(ctx, domain.RegionsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{domain.SummarySubjects},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("regions: %w", err)
	}
	pending := int(cons.CachedInfo().NumPending)
	var out []domain.Summary
	for got := 0; got < pending; {
		batch, err := cons.Fetch(pending-got, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("regions: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			p, err := domain.DecodeSummary(m.Data())
			if err != nil {
				log.Warn("summary part left out: it does not decode", "subject", m.Subject(), "err", err)
				continue
			}
			out = append(out, p)
		}
		if err := batch.Error(); err != nil && n == 0 {
			return nil, fmt.Errorf("regions: %w", err)
		}
		got += n
	}
	return out, nil
}
