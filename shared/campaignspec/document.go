package campaignspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"maintsignals/shared/domain"
)

// Limits of a campaign's spec.
const (
	MaxSpecBytes   = domain.MaxCommandBytes
	MaxIDLength    = domain.MaxCampaignIDLength
	MaxPrefixes    = 1000 // in the selection, and in each wave
	MaxWaves       = 20
	MaxEntities    = 2_000_000 // in a list, and selected
	MaxSeedBytes   = 128
	MaxObjectBytes = 255
	MinSlot        = time.Minute
	MinLength      = time.Minute
	MaxLength      = domain.Week
	MaxSpan        = 366 * domain.Day // from window.earliest to window.deadline
	MaxLead        = 366 * domain.Day
	MaxPerSlotCap  = 1_000_000
)

// ValidID reports whether id is a campaign id: 1–40 of [a-z0-9-].
func ValidID(id string) bool { return domain.ValidCampaignID(id) }

// Document is a campaign's spec as it is written and sent: the JSON of the contract's fleet
// campaigns. Durations and times stay as written; Compile reads and checks them.
type Document struct {
	ID           string            `json:"id"`
	Reason       string            `json:"reason,omitempty"`
	Task         domain.Task       `json:"task"`
	Selection    SelectionDocument `json:"selection"`
	Window       WindowDocument    `json:"window"`
	Spread       SpreadDocument    `json:"spread"`
	AnnounceLead string            `json:"announceLead"`
	Waves        []WaveDocument    `json:"waves,omitempty"`
}

// SelectionDocument is what a campaign selects: a stored list of resource IDs and/or prefixes
// of the entities tracked when the campaign is created.
type SelectionDocument struct {
	List     *ListRef `json:"list,omitempty"`
	Prefixes []string `json:"prefixes,omitempty"`
}

// ListRef names a list in the Object Store bucket campaign-lists, with the SHA-256 of its
// bytes (lower-case hex) and the number of distinct entities it names.
type ListRef struct {
	Object string `json:"object"`
	SHA256 string `json:"sha256"`
	Count  int    `json:"count"`
}

// WindowDocument is every entity's window: its length, and the span the windows lie in.
type WindowDocument struct {
	Length   string `json:"length"`
	Earliest string `json:"earliest"`
	Deadline string `json:"deadline"`
}

// SpreadDocument is how the windows are spread over slots.
type SpreadDocument struct {
	Across                    string `json:"across"`
	Slot                      string `json:"slot"`
	MaxPerSlot                int    `json:"maxPerSlot"`
	MaxPerSlotPerSubscription int    `json:"maxPerSlotPerSubscription,omitempty"`
	Seed                      string `json:"seed,omitempty"`
}

// WaveDocument is a wave: the entities its prefixes select (the last wave may have none and
// takes the rest), a manual gate, and the failed share that halts the campaign.
type WaveDocument struct {
	Name             string   `json:"name"`
	Prefixes         []string `json:"prefixes,omitempty"`
	Gate             string   `json:"gate,omitempty"`
	FailureThreshold string   `json:"failureThreshold,omitempty"`
}

// GateManual is the gate of a wave that waits for approve.
const GateManual = "manual"

// DecodeDocument reads a spec strictly: one JSON object of at most MaxSpecBytes, no key
// unknown, repeated or cased otherwise, every value of its JSON type. A rejection names the
// field at fault ("spread.slot", "waves[1].gate"). It does not check values: Compile does.
func DecodeDocument(body []byte) (Document, *domain.Rejection) {
	var d Document
	if rej := domain.DecodeStrict(body, MaxSpecBytes, "spec", &d); rej != nil {
		return Document{}, rej
	}
	return d, nil
}

// ParseSpec is DecodeDocument then Compile.
func ParseSpec(body []byte) (*Spec, *domain.Rejection) {
	d, rej := DecodeDocument(body)
	if rej != nil {
		return nil, rej
	}
	return d.Compile()
}

// Canonical is the spec in its canonical form: the document as Spec.Document writes it
// (durations and times normalised, defaults filled, prefixes sorted), as compact JSON.
func (s *Spec) Canonical() []byte {
	b, err := json.Marshal(s.Document())
	if err != nil {
		panic(fmt.Sprintf("campaign: encode a compiled spec: %v", err)) // plain strings and numbers
	}
	return b
}

// Digest is the SHA-256 of the canonical form, in lower-case hex: two specs mean the same
// campaign exactly when their digests are equal.
func (s *Spec) Digest() string {
	sum := sha256.Sum256(s.Canonical())
	return hex.EncodeToString(sum[:])
}

// Document writes the spec back as a document in canonical form: durations as
// domain.FormatDuration writes them, times in UTC RFC 3339, the seed filled with the id when
// it was empty, prefixes lower-cased, sorted and without repeats, thresholds without
// trailing zeros. An implicit wave (a spec without waves) is not written.
func (s *Spec) Document() Document {
	d := Document{
		ID: s.ID, Reason: s.Reason, Task: s.Task,
		Selection: SelectionDocument{List: s.List, Prefixes: prefixIDs(s.Prefixes)},
		Window: WindowDocument{Length: domain.FormatDuration(s.Length),
			Earliest: s.Earliest.Format(time.RFC3339Nano), Deadline: s.Deadline.Format(time.RFC3339Nano)},
		Spread: SpreadDocument{Across: domain.FormatDuration(s.Across), Slot: domain.FormatDuration(s.Slot),
			MaxPerSlot: s.MaxPerSlot, MaxPerSlotPerSubscription: s.MaxPerSubscription, Seed: s.Seed},
		AnnounceLead: domain.FormatDuration(s.AnnounceLead),
	}
	if s.explicitWaves {
		for _, w := range s.Waves {
			wd := WaveDocument{Name: w.Name, Prefixes: prefixIDs(w.Prefixes), FailureThreshold: w.Threshold.String()}
			if w.Manual {
				wd.Gate = GateManual
			}
			d.Waves = append(d.Waves, wd)
		}
	}
	return d
}
