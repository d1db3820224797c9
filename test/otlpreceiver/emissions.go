package otlpreceiver

import (
	"slices"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
)

// The emitter's requests, as one tick's emission: a tick is shared in shards, each sent in
// requests of its own by whichever replica holds it, every point carrying the tick's time,
// and each shard's last request carrying its fleet view.
const (
	emissionStatus   = "cluster.maintenance.status"
	emissionEntities = "cluster.maintenance.entities"
	emissionShard    = "cluster.maintenance.emitter.shard"
)

// Emission is the whole emission of one tick: every request whose points carry the tick's
// time, merged, once the fleet view of every shard has come.
type Emission struct {
	Tick time.Time // the time its points carry
	At   time.Time // when its last request arrived
	Seq  int       // the Seq of its last request
	// Replicas are the values of the resource attribute "replica" of its requests, sorted.
	Replicas []string
	Export   Export // the requests merged into one (nil Request without payloads)
}

// Emissions lists the whole emissions of shards shards received so far, in order of arrival.
func (r *Receiver) Emissions(shards int) []Emission {
	byTick := map[time.Time][]Export{}
	for _, e := range r.Exports() {
		if at, ok := emissionTime(e); ok {
			byTick[at] = append(byTick[at], e)
		}
	}
	var out []Emission
	for at, xs := range byTick {
		if em, whole := merge(at, xs, shards); whole {
			out = append(out, em)
		}
	}
	slices.SortFunc(out, func(a, b Emission) int { return a.At.Compare(b.At) })
	return out
}

func merge(at time.Time, xs []Export, shards int) (Emission, bool) {
	em := Emission{Tick: at}
	req := &colmetricpb.ExportMetricsServiceRequest{}
	seen := map[string]bool{}
	for _, x := range xs {
		req.ResourceMetrics = append(req.ResourceMetrics, x.Request.GetResourceMetrics()...)
		if x.Seq > em.Seq {
			em.Seq, em.At = x.Seq, x.At
		}
		for _, p := range x.Find(emissionEntities, nil) {
			seen[p.Attrs[emissionShard]] = true
		}
		if ps := x.Points(); len(ps) > 0 && !slices.Contains(em.Replicas, ps[0].Resource["replica"]) {
			em.Replicas = append(em.Replicas, ps[0].Resource["replica"])
		}
	}
	slices.Sort(em.Replicas)
	em.Export = Export{Seq: em.Seq, At: em.At, Request: req}
	return em, len(seen) == shards
}

// emissionTime is the time the emission points of a request carry (false: none).
func emissionTime(e Export) (time.Time, bool) {
	for _, name := range []string{emissionEntities, emissionStatus} {
		if ps := e.Find(name, nil); len(ps) > 0 {
			return ps[0].Time, true
		}
	}
	return time.Time{}, false
}
