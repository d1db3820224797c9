package campaign

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

// Status is where a campaign stands.
type Status string

// The statuses of the contract's fleet campaigns.
const (
	StatusPlanning  Status = "planning"  // created; its entities are being planned
	StatusActive    Status = "active"    // announcing as windows come due, wave by wave
	StatusPaused    Status = "paused"    // announcing nothing new (withdrawing, with withdraw)
	StatusHalted    Status = "halted"    // a wave failed past its threshold: nothing new until resume
	StatusCompleted Status = "completed" // every entity finished
	StatusCancelled Status = "cancelled" // final: what had not started is withdrawn
)

// Statuses lists every status in a fixed order (the status metric's state set).
var Statuses = []Status{StatusPlanning, StatusActive, StatusPaused, StatusHalted, StatusCompleted, StatusCancelled}

// WaveState is how far a wave has come.
type WaveState struct {
	// Opened: the wave's entities may be announced (every earlier wave was finished, and its
	// gate approved). A wave stays open once opened.
	Opened   bool `json:"opened,omitempty"`
	Approved bool `json:"approved,omitempty"`
	// Waived: resumed after its failures passed the threshold, which no longer halts.
	Waived bool `json:"waived,omitempty"`
}

// Retry is a retry in effect: the entities in Phase of an earlier generation are planned anew
// in Generation. The function drops it (Campaign.Swept) once it has stepped every entity.
type Retry struct {
	Phase      Phase `json:"phase"`
	Generation int   `json:"generation"`
}

// Campaign is a campaign's own state: the value of its id in the campaigns bucket. Apply,
// Activate and Advance return a new one and never change the one they are given.
type Campaign struct {
	ID         string                `json:"id"`
	Spec       campaignspec.Document `json:"spec"` // canonical
	Digest     string                `json:"digest"`
	Status     Status                `json:"status"`
	Generation int                   `json:"generation"`
	Withdraw   bool                  `json:"withdraw,omitempty"` // paused (or then halted) with withdraw
	Waves      []WaveState           `json:"waves"`
	Retries    []Retry               `json:"retries,omitempty"`
	Entities   int                   `json:"entities"`
	Progress   int                   `json:"progress"`           // tenths of the selection done, reported
	Finished   bool                  `json:"finished,omitempty"` // completed reported, and no retry since
	Events     int                   `json:"events"`             // lifecycle events so far: numbers their ids
	CreatedAt  time.Time             `json:"createdAt"`
	UpdatedAt  time.Time             `json:"updatedAt"`

	// What the campaign function keeps beside the state the rules decide:
	// Tally is the entities' phases as last counted, wave by wave (the status and the list
	// read it, not every entity).
	Tally Tally `json:"tally"`
	// Events is how far the function has read each cell's events stream for this campaign:
	// the outcome events after it are still to be observed.
	Read Cursor `json:"read"`
	// EventsSeq is how far a campaign of the first layout had read MAINT_EVENTS (Legacy).
	EventsSeq uint64 `json:"eventsSeq,omitempty"`
	// Commands are the campaign commands applied lately (at most MaxRemembered), so that one
	// sent again is a duplicate.
	Commands []Applied `json:"commands,omitempty"`
	// Outbox is what the last decision publishes: written with the state it decided, then
	// published, then cleared (see Message).
	Outbox []Message `json:"outbox,omitempty"`

	spec *campaignspec.Spec
}

// Compiled is the campaign's compiled spec.
func (c *Campaign) Compiled() *campaignspec.Spec { return c.spec }

// Encode marshals the campaign for its bucket.
func (c *Campaign) Encode() ([]byte, error) { return encode("campaign", c) }

// DecodeCampaign reads a campaign from its bucket, compiling its spec again.
func DecodeCampaign(b []byte) (*Campaign, error) {
	var c Campaign
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode campaign: %w", err)
	}
	s, rej := c.Spec.Compile()
	if rej != nil {
		return nil, fmt.Errorf("decode campaign %s: spec: %w", c.ID, rej)
	}
	if len(c.Waves) != len(s.Waves) {
		return nil, fmt.Errorf("decode campaign %s: %d wave states for %d waves", c.ID, len(c.Waves), len(s.Waves))
	}
	switch len(c.Tally.Waves) {
	case 0:
		c.Tally.Waves = make([]Counts, len(s.Waves))
	case len(s.Waves):
	default:
		return nil, fmt.Errorf("decode campaign %s: counts of %d waves for %d waves", c.ID, len(c.Tally.Waves), len(s.Waves))
	}
	c.spec = s
	return &c, nil
}

func (c *Campaign) clone() *Campaign {
	n := *c
	n.Waves = slices.Clone(c.Waves)
	n.Retries = slices.Clone(c.Retries)
	n.Tally = c.Tally.Clone()
	n.Commands = slices.Clone(c.Commands)
	n.Outbox = slices.Clone(c.Outbox)
	return &n
}

// WaveOpen reports whether the entities of a wave may be announced.
func (c *Campaign) WaveOpen(wave int) bool {
	return wave >= 0 && wave < len(c.Waves) && c.Waves[wave].Opened
}

// Swept drops the retries up to generation: the function stepped every entity since they
// were made.
func (c *Campaign) Swept(generation int) *Campaign {
	n := c.clone()
	n.Retries = slices.DeleteFunc(n.Retries, func(r Retry) bool { return r.Generation <= generation })
	return n
}

// NewCampaign is a campaign created from spec at at, planning.
func NewCampaign(s *campaignspec.Spec, at time.Time) *Campaign {
	return &Campaign{ID: s.ID, Spec: s.Document(), Digest: s.Digest(), Status: StatusPlanning, Generation: 1,
		Waves: make([]WaveState, len(s.Waves)), Tally: NewTally(s), CreatedAt: at, UpdatedAt: at, spec: s}
}

// Legacy reports whether the campaign was stored by the first layout, its reading of the
// outcome events not yet moved to the cells' streams (Read is set from EventsSeq's time on).
func (c *Campaign) Legacy() bool { return c.Read == Cursor{} && c.EventsSeq > 0 }

// Cursor is a position in each cell's events stream (domain.Cells): the sequence read up to.
type Cursor [domain.Cells]uint64

// Max is the cursor at the further of c and o in every cell.
func (c Cursor) Max(o Cursor) Cursor {
	for i := range c {
		c[i] = max(c[i], o[i])
	}
	return c
}

// Min is the cursor at the nearer of c and o in every cell.
func (c Cursor) Min(o Cursor) Cursor {
	for i := range c {
		c[i] = min(c[i], o[i])
	}
	return c
}
