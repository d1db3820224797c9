// Package admission is what the command function needs of fleet campaigns: the ids of a
// campaign's commands, the rule by which it admits a command that carries campaign or
// ifCampaign, and a campaign's deadline as its bucket holds it. It is apart from package
// campaign so that the command function does not depend on the planner and the campaign's
// own state.
package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"maintsignals/shared/domain"
)

// Command is a command a campaign sends to an entity: an ordinary command of the messaging
// contract with the fields campaigns add, campaign (on its Pending) and ifCampaign (on its
// withdrawal), which domain.Command carries.
type Command struct {
	domain.Command
}

// Encode marshals the command as JSON (IssuedAt as the sender stamped it).
func (c Command) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode campaign command: %w", err)
	}
	return b, nil
}

// Actor is the actor of a campaign's commands.
func Actor(id string) string { return "campaign:" + id }

// keyHash is the first 16 hex digits of the SHA-256 of an entity key.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// AnnounceID is the id (and Nats-Msg-Id) of campaign id's Pending for the entity of key in a
// generation: campaign.<id>.<generation>.<first 16 hex of SHA-256(key)>. Deterministic, so a
// crash re-sends the same command and the exactly-once path drops the copy.
func AnnounceID(id string, generation int, key string) string {
	return "campaign." + id + "." + strconv.Itoa(generation) + "." + keyHash(key)
}

// WithdrawID is the id of the None that withdraws that Pending:
// campaign.<id>.<generation>.withdraw.<hex>.
func WithdrawID(id string, generation int, key string) string {
	return "campaign." + id + "." + strconv.Itoa(generation) + ".withdraw." + keyHash(key)
}

// ParseCommandID reads an AnnounceID or a WithdrawID: the campaign, the generation, whether it
// is a withdrawal, and the hex of the key; ok false when id has neither form.
func ParseCommandID(id string) (campaign string, generation int, withdraw bool, hex string, ok bool) {
	parts := strings.Split(id, ".")
	if len(parts) < 4 || len(parts) > 5 || parts[0] != "campaign" || !domain.ValidCampaignID(parts[1]) {
		return "", 0, false, "", false
	}
	gen, err := strconv.Atoi(parts[2])
	if err != nil || gen < 1 || strconv.Itoa(gen) != parts[2] {
		return "", 0, false, "", false
	}
	withdraw = len(parts) == 5
	if withdraw && parts[3] != "withdraw" {
		return "", 0, false, "", false
	}
	hex = parts[len(parts)-1]
	if len(hex) != 16 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", 0, false, "", false
	}
	return parts[1], gen, withdraw, hex, true
}

// Admit is the command function's rule for a command that carries campaign or ifCampaign,
// checked against the entity's record r before the transition table:
//   - campaign: only on a Pending with a window whose id is the campaign's AnnounceID for the
//     entity (InvalidParameter, "campaign" or "id"); it applies only when the entity has no
//     announced window or the window is that campaign's (else RequestNotAllowed, "campaign":
//     the campaign sees the entity superseded);
//   - ifCampaign: applies only while the window is that campaign's (else RequestNotAllowed,
//     "ifCampaign").
//
// It returns the campaign the record carries once the command applied (nil for none).
func Admit(r domain.Record, c Command, key string) (*domain.CampaignRef, *domain.Rejection) {
	if c.IfCampaign != "" && (r.Campaign == nil || r.Campaign.ID != c.IfCampaign) {
		return nil, &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "ifCampaign",
			Message: fmt.Sprintf("the entity's window is not campaign %s's any more; nothing to withdraw", domain.Truncate(c.IfCampaign, 64))}
	}
	if c.Campaign == "" {
		return nil, nil
	}
	id, gen, withdraw, hex, ok := ParseCommandID(c.ID)
	switch {
	case c.Task != domain.TaskPending || c.Window == nil:
		return nil, domain.InvalidParameter("campaign", "is allowed only on a Pending with a window")
	case !ok || withdraw || id != c.Campaign || hex != keyHash(key):
		return nil, domain.InvalidParameter("id", "a campaign's Pending has the id campaign.<campaign>.<generation>.<first 16 hex of the SHA-256 of the key>")
	case r.Window != nil && (r.Campaign == nil || r.Campaign.ID != c.Campaign):
		return nil, &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "campaign",
			Message: fmt.Sprintf("the entity has an announced window (%s to %s) that is not campaign %s's", r.Window.Start.UTC().Format(time.RFC3339), r.Window.End.UTC().Format(time.RFC3339), c.Campaign)}
	}
	return &domain.CampaignRef{ID: id, Generation: gen}, nil
}

// Deadline is the deadline of a campaign as the campaigns bucket holds it (value): the
// window.deadline of its canonical spec, which package campaign compiled when it wrote it.
func Deadline(value []byte) (time.Time, error) {
	var c struct {
		Spec struct {
			Window struct {
				Deadline string `json:"deadline"`
			} `json:"window"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(value, &c); err != nil {
		return time.Time{}, fmt.Errorf("decode campaign: %w", err)
	}
	t, err := time.Parse(time.RFC3339, c.Spec.Window.Deadline)
	if err != nil {
		return time.Time{}, fmt.Errorf("decode campaign: deadline: %w", err)
	}
	return t.UTC(), nil
}
