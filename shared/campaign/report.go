package campaign

import (
	"maintsignals/shared/campaignspec"
)

// Report is a campaign's status as `campaign status -o json` and the web view show it.
type Report struct {
	ID         string       `json:"id"`
	Status     Status       `json:"status"`
	Generation int          `json:"generation"`
	Entities   int          `json:"entities"`
	Phases     Counts       `json:"phases"`
	Done       int          `json:"done"`
	Finished   int          `json:"finished"`
	Waves      []WaveReport `json:"waves,omitempty"`
}

// WaveReport is one wave of a Report (a spec without waves has none).
type WaveReport struct {
	Name      string `json:"name"`
	Gate      string `json:"gate,omitempty"`
	Threshold string `json:"failureThreshold,omitempty"`
	Opened    bool   `json:"opened"`
	Approved  bool   `json:"approved,omitempty"`
	Waived    bool   `json:"waived,omitempty"`
	Entities  int    `json:"entities"`
	Phases    Counts `json:"phases"`
}

// NewReport is the report of campaign c whose entities are tallied in t.
func NewReport(c *Campaign, t Tally) Report {
	phases := t.Total()
	r := Report{ID: c.ID, Status: c.Status, Generation: c.Generation, Entities: phases.Total(),
		Phases: phases, Done: phases.Done(), Finished: phases.Finished()}
	if c.spec.ExplicitWaves() {
		for i, w := range c.spec.Waves {
			wr := WaveReport{Name: w.Name, Threshold: w.Threshold.String(), Opened: c.Waves[i].Opened,
				Approved: c.Waves[i].Approved, Waived: c.Waves[i].Waived, Entities: t.Waves[i].Total(), Phases: t.Waves[i]}
			if w.Manual {
				wr.Gate = campaignspec.GateManual
			}
			r.Waves = append(r.Waves, wr)
		}
	}
	return r
}
