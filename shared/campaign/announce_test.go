package campaign_test

import (
	"encoding/json"
	"strings"
	"testing"

	"maintsignals/shared/campaign"
	"maintsignals/shared/campaign/admission"
	"maintsignals/shared/domain"
)

func TestEventTypes_TheContractsNames(t *testing.T) {
	for _, ty := range campaign.EventTypes {
		if !strings.HasPrefix(string(ty), "io.maintsignals.campaign.") || strings.Count(string(ty), ".") != 3 {
			t.Errorf("%s", ty)
		}
	}
	if got := campaign.OutcomeType(domain.OutcomeDuplicate); got != "io.maintsignals.campaign.command.duplicate" {
		t.Errorf("%s", got)
	}
	if ev := (campaign.Event{Campaign: "c"}); ev.Subject() != "maint.campaign.evt.c" || domain.CampaignCommandSubject("c") != "maint.campaign.cmd.c" ||
		domain.CampaignEntityKey("c", "subscriptions/s/resourcegroups/g/x") != "c.s.g.subscriptions/s/resourcegroups/g/x" {
		t.Errorf("subjects %s", ev.Subject())
	}
}

func TestAnnouncementAndWithdrawal_OrdinaryCommandsWithTheCampaignsFields(t *testing.T) {
	c := live(t, campaign.StatusActive)
	e := ent(campaign.PhasePlanned, 1)
	a := campaign.Announcement(c, entityKey, e)
	body, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	if m["task"] != "Pending" || m["campaign"] != "pucm-2026-12" || m["actor"] != "campaign:pucm-2026-12" || m["reason"] != "PUCM: control plane upgrade" ||
		m["resourceId"] != entityID || m["id"] != admission.AnnounceID(c.ID, 1, entityKey) || m["window"] == nil || m["ifCampaign"] != nil {
		t.Errorf("announcement %s", body)
	}
	if rej := a.Command.Validate(entityKey, a.ID); rej != nil {
		t.Errorf("the announcement is not a valid command: %v", rej)
	}
	c.Status = campaign.StatusCancelled
	w := campaign.Withdrawal(c, entityKey, e)
	body, _ = w.Encode()
	m = map[string]any{}
	json.Unmarshal(body, &m)
	if m["task"] != "None" || m["ifCampaign"] != "pucm-2026-12" || m["campaign"] != nil || m["window"] != nil || !strings.Contains(m["reason"].(string), "cancelled") {
		t.Errorf("withdrawal %s", body)
	}
	if rej := w.Command.Validate(entityKey, w.ID); rej != nil {
		t.Errorf("the withdrawal is not a valid command: %v", rej)
	}
}

// The command function reads a campaign's deadline with admission.Deadline, not by compiling
// the spec: it must be the compiled one.
func TestDeadline_TheCompiledSpecs(t *testing.T) {
	c := live(t, campaign.StatusActive)
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := admission.Deadline(b); err != nil || !got.Equal(c.Compiled().Deadline) {
		t.Errorf("deadline %v, %v; compiled %v", got, err, c.Compiled().Deadline)
	}
}
