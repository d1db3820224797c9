package campaign

import "time"

// advance changes c in place (a clone) and returns the events it made.
func (c *Campaign) advance(t Tally, at time.Time) (*Campaign, []Event) {
	var out []Event
	phases := t.Total()
	if c.Status == StatusActive || c.Status == StatusPaused {
		if w := c.exceeded(t); w >= 0 {
			c.Status = StatusHalted
			out = c.emit(out, EventHalted, phases, at)
			out[len(out)-1].Wave = c.spec.Waves[w].Name
		}
	}
	if c.Status == StatusActive {
		c.openWaves(t)
	}
	if c.Entities > 0 {
		for done := min(10, phases.Done()*10/c.Entities); c.Progress < done; {
			c.Progress++
			out = c.emit(out, EventProgress, phases, at)
			out[len(out)-1].Done = c.Progress
		}
	}
	if !c.Finished && phases.Total() > 0 && phases.Finished() == phases.Total() {
		c.Finished = true
		if c.Status != StatusCancelled {
			c.Status = StatusCompleted
		}
		out = c.emit(out, EventCompleted, phases, at)
	}
	return c, out
}

// exceeded is the first open wave whose failed entities pass its threshold, not waived; -1.
func (c *Campaign) exceeded(t Tally) int {
	for i, w := range c.spec.Waves {
		if c.Waves[i].Opened && !c.Waves[i].Waived && w.Threshold.Exceeded(t.Waves[i].Of(PhaseFailed), t.Waves[i].Total()) {
			return i
		}
	}
	return -1
}

// openWaves opens, in order, each wave whose earlier waves are all finished and whose gate,
// if manual, is approved.
func (c *Campaign) openWaves(t Tally) {
	for i, w := range c.spec.Waves {
		if c.Waves[i].Opened {
			continue
		}
		if w.Manual && !c.Waves[i].Approved {
			return
		}
		for j := range i {
			if t.Waves[j].Finished() < t.Waves[j].Total() {
				return
			}
		}
		c.Waves[i].Opened = true
	}
}
