package campaign

import (
	"fmt"
	"strings"
	"time"

	"maintsignals/shared/campaignspec"
	"maintsignals/shared/domain"
)

// Action is what a campaign command does.
type Action string

// Campaign command actions.
const (
	ActionCreate  Action = "create"
	ActionPause   Action = "pause"
	ActionResume  Action = "resume"
	ActionCancel  Action = "cancel"
	ActionRetry   Action = "retry"
	ActionApprove Action = "approve"
)

// Actions lists every action.
var Actions = []Action{ActionCreate, ActionPause, ActionResume, ActionCancel, ActionRetry, ActionApprove}

// Control is a campaign command, published on maint.campaign.cmd.<campaign> (stream
// MAINT_CAMPAIGNS) with Nats-Msg-Id id, signed like admin commands.
type Control struct {
	ID       string                 `json:"id"`
	Campaign string                 `json:"campaign"`
	Action   Action                 `json:"action"`
	Spec     *campaignspec.Document `json:"spec,omitempty"`     // create
	Withdraw bool                   `json:"withdraw,omitempty"` // pause
	Phase    Phase                  `json:"phase,omitempty"`    // retry
	Wave     string                 `json:"wave,omitempty"`     // approve
	Actor    string                 `json:"actor,omitempty"`
	IssuedAt string                 `json:"issuedAt,omitempty"`

	compiled *campaignspec.Spec
}

// Compiled is the compiled spec of a create (nil for the other actions).
func (c Control) Compiled() *campaignspec.Spec { return c.compiled }

// DecodeControl reads a campaign command received on the subject of campaign id, with msgID
// its Nats-Msg-Id ("" if none): strictly, as DecodeDocument reads a spec, then its fields. A
// create's spec is compiled (targets "spec.…") and must have the campaign's id.
func DecodeControl(body []byte, id, msgID string) (Control, *domain.Rejection) {
	var c Control
	if rej := domain.DecodeStrict(body, domain.MaxCommandBytes, "body", &c); rej != nil {
		return Control{}, rej
	}
	if rej := c.validate(id, msgID); rej != nil {
		return c, rej
	}
	if c.Action == ActionCreate {
		s, rej := c.Spec.Compile()
		if rej != nil {
			rej.Target = strings.TrimSuffix("spec."+rej.Target, ".")
			return c, rej
		}
		if s.ID != c.Campaign {
			return c, domain.InvalidParameter("spec.id", "is %q, but the command is for campaign %q", s.ID, c.Campaign)
		}
		c.compiled = s
	}
	return c, nil
}

func (c *Control) validate(id, msgID string) *domain.Rejection {
	needs := map[Action]bool{ActionCreate: c.Spec != nil, ActionPause: true, ActionResume: true, ActionCancel: true,
		ActionRetry: c.Phase != "", ActionApprove: c.Wave != ""}
	ok, known := needs[c.Action]
	switch {
	case c.ID == "" || !domain.ValidID(c.ID):
		return domain.InvalidParameter("id", "must be 1-%d characters of [A-Za-z0-9_.:-]", domain.MaxIDLength)
	case msgID != "" && msgID != c.ID:
		return domain.InvalidParameter("id", "differs from the Nats-Msg-Id header %q", domain.Truncate(msgID, 64))
	case !campaignspec.ValidID(c.Campaign) || id != "" && c.Campaign != id:
		return domain.InvalidParameter("campaign", "must be the campaign id of the subject (%q), got %q", id, domain.Truncate(c.Campaign, 64))
	case !known:
		return domain.InvalidParameter("action", "must be one of %v, got %q", Actions, domain.Truncate(string(c.Action), 64))
	case !ok:
		return domain.InvalidParameter(map[Action]string{ActionCreate: "spec", ActionRetry: "phase", ActionApprove: "wave"}[c.Action], "is required with %s", c.Action)
	case c.Spec != nil && c.Action != ActionCreate, c.Withdraw && c.Action != ActionPause,
		c.Phase != "" && c.Action != ActionRetry, c.Wave != "" && c.Action != ActionApprove:
		return domain.InvalidParameter("action", "%s takes only its own fields (spec with create, withdraw with pause, phase with retry, wave with approve)", c.Action)
	case c.Action == ActionRetry && !c.Phase.Retryable():
		return domain.InvalidParameter("phase", "must be failed, skipped or rejected, got %q", domain.Truncate(string(c.Phase), 32))
	case len(c.Actor) > domain.MaxActorBytes || domain.HasControl(c.Actor, false):
		return domain.InvalidParameter("actor", "must be at most %d bytes without control characters", domain.MaxActorBytes)
	}
	if c.IssuedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, c.IssuedAt); err != nil {
			return domain.InvalidParameter("issuedAt", "must be an RFC 3339 time")
		}
	}
	return nil
}

func notAllowed(format string, args ...any) *domain.Rejection {
	return &domain.Rejection{Code: domain.CodeRequestNotAllowed, Target: "action", Message: fmt.Sprintf(format, args...)}
}

// CheckSelection refuses a create whose selection is empty (InvalidParameter, "selection").
func CheckSelection(sel Selection) *domain.Rejection {
	if len(sel) == 0 {
		return domain.InvalidParameter("selection", "selects no entity: the list is empty and no tracked entity is under the prefixes")
	}
	return nil
}
