package web

import (
	"encoding/json"
	"fmt"
	"time"

	"maintsignals/shared/domain"
)

// recordSummary is the part of a record the fleet index keeps: decoding into it skips the
// history a record carries (recent command ids, the last event, signed ids) without building it.
type recordSummary struct {
	ResourceID string              `json:"resourceId"`
	State      domain.State        `json:"state"`
	Updating   bool                `json:"updating"`
	Task       domain.Task         `json:"task"`
	LastError  string              `json:"lastError"`
	Window     *domain.Window      `json:"window"`
	Reason     string              `json:"reason"`
	StateSince time.Time           `json:"stateSince"`
	UpdatedAt  time.Time           `json:"updatedAt"`
	Campaign   *domain.CampaignRef `json:"campaign"`
	// The command that wrote the record: shown, and when it was stored (a conflict is a
	// window announced before the policy in force).
	LastCommandID  string    `json:"lastCommandId"`
	LastCommandSeq uint64    `json:"lastCommandSeq"`
	LastCommandAt  time.Time `json:"lastCommandAt"`
	Version        int       `json:"version"`
	// ForgottenAt leaves a forgotten entity out of the fleet, as a deleted key.
	ForgottenAt time.Time `json:"forgottenAt"`
}

// decodeSummary reads what the index keeps of a record.
func decodeSummary(b []byte) (domain.Record, error) {
	var s recordSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return domain.Record{}, fmt.Errorf("decode record: %w", err)
	}
	if s.State == "" {
		s.State = domain.StateNone
	}
	return domain.Record{ResourceID: s.ResourceID, State: s.State, Updating: s.Updating, Task: s.Task,
		LastError: s.LastError, Window: s.Window, Reason: s.Reason, StateSince: s.StateSince, UpdatedAt: s.UpdatedAt,
		Campaign: s.Campaign, ForgottenAt: s.ForgottenAt, LastCommandID: s.LastCommandID,
		LastCommandSeq: s.LastCommandSeq, LastCommandAt: s.LastCommandAt, Version: s.Version}, nil
}
