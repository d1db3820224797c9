package command

import (
	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
)

// campaignRules are the fleet campaigns' rules of a command, checked before the notice and the
// transition table:
//   - a campaign's Pending for an entity that already holds that campaign's window of the
//     same generation changes nothing (held): it is a copy published again after the stream's
//     duplicate window, by a campaign function that crashed between publishing and writing;
//     the window stands as it is, a customer's reschedule included;
//   - otherwise campaign.Admit: a campaign's Pending applies only over no announced window or
//     its own, and a command with ifCampaign only while the window is that campaign's.
//
// ref is the campaign the record carries once the command applied (nil: the record's own,
// which the transition table keeps or drops with the window).
func campaignRules(rec domain.Record, cmd domain.Command) (ref *domain.CampaignRef, held bool, rej *domain.Rejection) {
	if cmd.Campaign == "" && cmd.IfCampaign == "" {
		return nil, false, nil
	}
	if id, gen, withdraw, _, ok := campaign.ParseCommandID(cmd.ID); ok && !withdraw && cmd.Campaign == id &&
		rec.Campaign != nil && *rec.Campaign == (domain.CampaignRef{ID: id, Generation: gen}) {
		return nil, true, nil
	}
	key, err := domain.Key(cmd.ResourceID)
	if err != nil {
		return nil, false, domain.InvalidParameter("resourceId", "%v", err)
	}
	ref, rej = campaign.Admit(rec, campaign.Command{Command: cmd}, key)
	return ref, false, rej
}
