package domain

// CampaignRef names a fleet campaign and the generation of its announcements. A record carries
// one while its window is that campaign's announcement: the campaign's own Pending sets it,
// and Apply drops it with the window (a later Pending, or a return to None). It is never
// changed in place: records share it when they are copied.
type CampaignRef struct {
	ID         string `json:"id"`
	Generation int    `json:"generation"`
}

// EventCampaign is the campaign an outcome event carries: the one of the record the command
// wrote, or else the one of the record before it. So the event of every command on an entity
// whose window is a campaign's names that campaign, the command that ended the window (an
// update's success, an SRE's None, another Pending) included.
func EventCampaign(prev, next Record) *CampaignRef {
	if next.Campaign != nil {
		return next.Campaign
	}
	return prev.Campaign
}
