package campaign

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"maintsignals/shared/campaignspec"
)

// Phase is where one entity of a campaign stands.
type Phase string

// The phases of the contract's fleet campaigns.
const (
	PhasePlanned    Phase = "planned"     // a window, not yet announced
	PhaseAnnounced  Phase = "announced"   // its Pending sent (and, once its outcome came, applied)
	PhaseInProgress Phase = "in_progress" // the update started in the campaign's window
	PhaseSucceeded  Phase = "succeeded"
	PhaseFailed     Phase = "failed"
	PhaseSkipped    Phase = "skipped"    // no window (Reason says why); the record untouched
	PhaseRejected   Phase = "rejected"   // the announcement was refused (Reason says why)
	PhaseSuperseded Phase = "superseded" // another window took the entity's place
	PhaseCleared    Phase = "cleared"    // someone sent None (or forgot it) during the window
	PhaseCancelled  Phase = "cancelled"  // the campaign was cancelled before the update started
	PhaseOverdue    Phase = "overdue"    // still Pending after its window
)

// Phases lists every phase in a fixed order: the order of counts and metrics.
var Phases = []Phase{
	PhasePlanned, PhaseAnnounced, PhaseInProgress, PhaseSucceeded, PhaseFailed, PhaseSkipped,
	PhaseRejected, PhaseSuperseded, PhaseCleared, PhaseCancelled, PhaseOverdue,
}

const numPhases = 11

func (p Phase) index() int {
	for i, v := range Phases {
		if v == p {
			return i
		}
	}
	return -1
}

// Valid reports whether p is a phase, matched exactly.
func (p Phase) Valid() bool { return p.index() >= 0 }

// Done reports whether nothing more is to happen to the entity in its generation:
// succeeded, skipped, superseded, cleared or cancelled.
func (p Phase) Done() bool {
	switch p {
	case PhaseSucceeded, PhaseSkipped, PhaseSuperseded, PhaseCleared, PhaseCancelled:
		return true
	}
	return false
}

// Finished reports whether the entity is done or failed: a campaign whose entities are all
// finished is completed, and a wave whose entities are all finished lets the next start.
func (p Phase) Finished() bool { return p.Done() || p == PhaseFailed }

// Retryable reports whether retry accepts the phase: failed, skipped or rejected.
func (p Phase) Retryable() bool {
	return p == PhaseFailed || p == PhaseSkipped || p == PhaseRejected
}

// Counts is how many entities are in each phase.
type Counts [numPhases]int

// Of is the count of phase p.
func (c Counts) Of(p Phase) int {
	if i := p.index(); i >= 0 {
		return c[i]
	}
	return 0
}

// Add counts n more entities in phase p.
func (c *Counts) Add(p Phase, n int) {
	if i := p.index(); i >= 0 {
		c[i] += n
	}
}

// Total is the number of entities counted.
func (c Counts) Total() int { return c.sum(func(Phase) bool { return true }) }

// Done is the number of entities done.
func (c Counts) Done() int { return c.sum(Phase.Done) }

// Finished is the number of entities finished.
func (c Counts) Finished() int { return c.sum(Phase.Finished) }

func (c Counts) sum(keep func(Phase) bool) int {
	n := 0
	for i, p := range Phases {
		if keep(p) {
			n += c[i]
		}
	}
	return n
}

// MarshalJSON writes every phase, in the order of Phases, 0 included.
func (c Counts) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range Phases {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", p, strconv.Itoa(c[i]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads counts by phase; unknown phases are refused.
func (c *Counts) UnmarshalJSON(b []byte) error {
	var m map[Phase]int
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = Counts{}
	for p, n := range m {
		if !p.Valid() {
			return fmt.Errorf("unknown phase %q", p)
		}
		c.Add(p, n)
	}
	return nil
}

// Tally is the counts of a campaign's entities, wave by wave.
type Tally struct {
	Waves  []Counts `json:"waves"`  // by index in Spec.Waves
	NoWave Counts   `json:"noWave"` // the entities no wave covers (all skipped)
}

// NewTally is an empty tally for a spec.
func NewTally(s *campaignspec.Spec) Tally { return Tally{Waves: make([]Counts, len(s.Waves))} }

func (t *Tally) of(wave int) *Counts {
	if wave < 0 || wave >= len(t.Waves) {
		return &t.NoWave
	}
	return &t.Waves[wave]
}

// Add counts an entity of a wave in a phase.
func (t *Tally) Add(wave int, p Phase) { t.of(wave).Add(p, 1) }

// Move counts an entity of a wave that went from one phase to another.
func (t *Tally) Move(wave int, from, to Phase) {
	if from != to {
		t.of(wave).Add(from, -1)
		t.of(wave).Add(to, 1)
	}
}

// Total is the counts of every wave together: the burndown, which sums to the selection.
func (t Tally) Total() Counts {
	out := t.NoWave
	for _, w := range t.Waves {
		for i := range out {
			out[i] += w[i]
		}
	}
	return out
}

// Clone is a copy that does not share the waves' counts.
func (t Tally) Clone() Tally {
	t.Waves = append([]Counts(nil), t.Waves...)
	return t
}
