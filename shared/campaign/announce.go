package campaign

import (
	"encoding/json"
	"fmt"

	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

// Announcement is the Pending that announces the entity's window in its generation.
func Announcement(c *Campaign, key string, e Entity) admission.Command {
	return admission.Command{Command: domain.Command{
		ID: admission.AnnounceID(c.ID, e.Generation, key), ResourceID: e.ResourceID, Task: domain.TaskPending,
		Reason: c.Spec.Reason, Window: e.Window, Actor: admission.Actor(c.ID), Campaign: c.ID,
	}}
}

// Withdrawal is the None that withdraws the entity's announced window, and only while the
// window is still the campaign's (ifCampaign).
func Withdrawal(c *Campaign, key string, e Entity) admission.Command {
	why := "paused"
	if c.Status == StatusCancelled {
		why = "cancelled"
	}
	return admission.Command{Command: domain.Command{
		ID: admission.WithdrawID(c.ID, e.Generation, key), ResourceID: e.ResourceID, Task: domain.TaskNone,
		Reason: fmt.Sprintf("campaign %s %s: its window is withdrawn", c.ID, why), Actor: admission.Actor(c.ID), IfCampaign: c.ID,
	}}
}

// encode marshals v, an error naming what it is.
func encode(what string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return b, nil
}
