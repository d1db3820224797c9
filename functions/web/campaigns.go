package web

import (
	"hash/maphash"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"maintsignals/shared/campaign"
)

// The campaigns as a replica sees them: the campaign function keeps each campaign's state in
// the campaigns bucket (domain.CampaignsBucket, under its id, a campaign.Campaign) and each of
// its entities' phase in the campaign-entities bucket (domain.CampaignEntitiesBucket, under
// <id>.<key>, a campaign.Entity). Both are followed like the records; of an entity only its
// phase and wave are kept (under a hash of its key: the counts need to know what an entity
// was, not its name), so that a campaign's page counts its phases from memory at any size.
// Either bucket may not exist yet: the pages then say that there are no campaigns.

// campaigns is the campaigns index. Its methods are safe for concurrent use.
type campaigns struct {
	mu   sync.RWMutex
	seed maphash.Seed
	log  *slog.Logger
	byID map[string]*campaign.Campaign
	// of is, by hash of a campaign-entities key, its phase (index in campaign.Phases, plus 1)
	// and its wave (plus 1, 0 none) packed in one value; counts, by campaign and wave (-1
	// none), the entities in each phase.
	of     map[uint64]uint32
	counts map[string]map[int]*campaign.Counts
	// found says which of the two buckets exist.
	found map[string]bool
}

func newCampaigns(log *slog.Logger) *campaigns {
	c := &campaigns{seed: maphash.MakeSeed(), log: log, found: map[string]bool{}}
	c.resetStates()
	c.resetEntities()
	return c
}

func (c *campaigns) resetStates() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID = map[string]*campaign.Campaign{}
}

func (c *campaigns) resetEntities() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.of = map[uint64]uint32{}
	c.counts = map[string]map[int]*campaign.Counts{}
}

// applyStates takes a batch of the campaigns bucket and returns the campaigns it changed.
func (c *campaigns) applyStates(batch []change) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(batch))
	for _, ch := range batch {
		ids = append(ids, ch.key)
		if ch.deleted {
			delete(c.byID, ch.key)
			continue
		}
		cp, err := campaign.DecodeCampaign(ch.value)
		if err != nil {
			c.log.Warn("a campaign does not decode; not shown", "campaign", ch.key, "error", err)
			delete(c.byID, ch.key)
			continue
		}
		c.byID[ch.key] = cp
	}
	return ids
}

// applyEntities takes a batch of the campaign-entities bucket and returns the campaigns it
// changed.
func (c *campaigns) applyEntities(batch []change) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, ch := range batch {
		id, _, ok := strings.Cut(ch.key, ".")
		if !ok {
			continue
		}
		if len(ids) == 0 || ids[len(ids)-1] != id {
			ids = append(ids, id)
		}
		h := maphash.String(c.seed, ch.key)
		if old, ok := c.of[h]; ok {
			c.count(id, old, -1)
			delete(c.of, h)
		}
		if ch.deleted {
			continue
		}
		e, err := campaign.DecodeEntity(ch.value)
		if err != nil {
			c.log.Warn("a campaign entity does not decode; not counted", "key", ch.key, "error", err)
			continue
		}
		v := uint32(slices.Index(campaign.Phases, e.Phase)+1) | uint32(max(e.Wave+1, 0))<<8
		c.of[h] = v
		c.count(id, v, 1)
	}
	return ids
}

func (c *campaigns) count(id string, v uint32, n int) {
	waves := c.counts[id]
	if waves == nil {
		waves = map[int]*campaign.Counts{}
		c.counts[id] = waves
	}
	wave := int(v>>8) - 1
	if waves[wave] == nil {
		waves[wave] = &campaign.Counts{}
	}
	waves[wave].Add(campaign.Phases[v&0xff-1], n)
}

// tally is the counts of campaign cp's entities, wave by wave.
func (c *campaigns) tally(cp *campaign.Campaign) campaign.Tally {
	t := campaign.NewTally(cp.Compiled())
	for wave, n := range c.counts[cp.ID] {
		if wave >= 0 && wave < len(t.Waves) {
			t.Waves[wave] = *n
			continue
		}
		for i, p := range campaign.Phases {
			t.NoWave.Add(p, n[i])
		}
	}
	return t
}

// report is the status report of campaign id, and the campaign.
func (c *campaigns) report(id string) (campaign.Report, *campaign.Campaign, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cp, ok := c.byID[id]
	if !ok {
		return campaign.Report{}, nil, false
	}
	return campaign.NewReport(cp, c.tally(cp)), cp, true
}

// list is every campaign's report, the newest first, and whether the campaigns bucket exists.
func (c *campaigns) list() ([]CampaignSummary, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]CampaignSummary, 0, len(c.byID))
	for _, cp := range c.byID {
		out = append(out, summarizeCampaign(cp, campaign.NewReport(cp, c.tally(cp))))
	}
	slices.SortFunc(out, func(a, b CampaignSummary) int {
		if d := b.CreatedAt.Compare(a.CreatedAt); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, c.found[bucketCampaigns]
}

func (c *campaigns) setFound(bucket string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.found[bucket] = ok
}
