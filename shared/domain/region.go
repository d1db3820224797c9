package domain

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Regions (README, Regions): each region is a deployment of its own, a JetStream domain named
// after it, joined to the hub (the domain HubDomain) as a leaf node. Each tick every emitter
// shard of a region publishes its part of the region's summary to SummaryStream in the region;
// the hub's RegionsStream sources every region's SummaryStream across domains.
const (
	// HubDomain is the JetStream domain of the hub; no region may take its name.
	HubDomain = "hub"
	// SummaryStream holds a region's summaries, in the region's domain.
	SummaryStream = "MAINT_SUMMARY"
	// SummaryPrefix + <region>.<shard> is where the emitter shards publish their parts.
	SummaryPrefix = "maint.summary."
	// SummarySubjects are every region's summary subjects.
	SummarySubjects = SummaryPrefix + ">"
	// RegionsStream holds, in the hub, the summaries sourced from every region.
	RegionsStream = "MAINT_REGIONS"
	// SummaryVersion is the version of the summary's JSON shape.
	SummaryVersion = 1
)

// RegionPrivate are the subjects that never cross the link between a region and the hub, in
// either direction: the region's own messages (commands, events, ticks, summaries), its
// buckets and object stores, and the acknowledgements and advisories of its consumers, whose
// names every region shares. What the hub needs of a region goes through the region's
// JetStream API ($JS.<region>.API): sourcing its summaries, reading a record.
var RegionPrivate = []string{"maint.>", "$KV.>", "$O.>", "$JS.ACK.>", "$JS.EVENT.>"}

// regionName is a region's name: one subject token and a JetStream domain, readable in a URL.
var regionName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ErrInvalidRegion is wrapped by every region name that cannot be used.
var ErrInvalidRegion = fmt.Errorf("invalid region name")

// ValidRegion checks a region's name: 1–32 of [a-z0-9-], starting with a letter, not "hub".
func ValidRegion(name string) error {
	if !regionName.MatchString(name) {
		return fmt.Errorf("%w %q: 1-32 of a-z, 0-9 and '-', starting with a letter", ErrInvalidRegion, truncate(name, 40))
	}
	if name == HubDomain {
		return fmt.Errorf("%w %q: the hub's domain", ErrInvalidRegion, name)
	}
	return nil
}

// RegionAPIPrefix is the JetStream API prefix of a region's domain, as seen from the hub (and
// from any other server joined to it): how the hub sources a region's summaries and reads its
// records.
func RegionAPIPrefix(region string) string { return "$JS." + region + ".API" }

// RegionOfAPIPrefix is the region whose JetStream API prefix p is (RegionAPIPrefix).
func RegionOfAPIPrefix(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "$JS.")
	if !ok {
		return "", false
	}
	r, ok := strings.CutSuffix(rest, ".API")
	return r, ok && ValidRegion(r) == nil
}

// SummarySubject is where shard s of a region publishes its part of the summary.
func SummarySubject(region string, s Shard) string {
	return SummaryPrefix + region + "." + s.String()
}

// SummaryMsgID is the de-duplication id of one part: sources de-duplicate by id in the hub, so
// it names the region, the shard and the tick.
func SummaryMsgID(region string, s Shard, at time.Time) string {
	return "summary:" + region + ":" + s.String() + ":" + strconv.FormatInt(at.UnixNano(), 10)
}

// Summary is one emitter shard's part of a region's summary for one tick: the entities of the
// shard as the tick's run counted them (the fleet gauges, the counts of `maintctl list`).
type Summary struct {
	Version int    `json:"version"`
	Region  string `json:"region"`
	// Shard is the part's shard, of Shards.
	Shard  int `json:"shard"`
	Shards int `json:"shards"`
	// At is the tick's time, which every point of the tick carries.
	At time.Time `json:"at"`
	// TickSeconds is the region's tick: the hub judges the region's freshness by it.
	TickSeconds float64 `json:"tickSeconds"`
	// Revision is the sum of the last sequences of the shard's records buckets when the run
	// read them: it grows with every record written.
	Revision uint64 `json:"revision"`
	// Counts are the tracked entities per state (every state present).
	Counts    map[State]int64 `json:"counts"`
	Updating  int64           `json:"updating"`
	Overdue   int64           `json:"overdue"`
	Stuck     int64           `json:"stuck"`
	Conflicts int64           `json:"conflicts"`
}

// DecodeSummary reads a summary part, checking what the hub relies on.
func DecodeSummary(b []byte) (Summary, error) {
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("summary: %w", err)
	}
	switch {
	case ValidRegion(s.Region) != nil:
		return Summary{}, fmt.Errorf("summary: %w", ValidRegion(s.Region))
	case s.Shards < 1 || s.Shard < 0 || s.Shard >= s.Shards:
		return Summary{}, fmt.Errorf("summary: shard %d of %d", s.Shard, s.Shards)
	case s.At.IsZero() || s.TickSeconds <= 0:
		return Summary{}, fmt.Errorf("summary: no tick time or tick")
	}
	return s, nil
}
