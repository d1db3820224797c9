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

// Names of the fleet campaigns' messaging contract.
const (
	// CampaignsStream holds the campaign commands, retained like commands.
	CampaignsStream = "MAINT_CAMPAIGNS"
	// CampaignCommandPrefix + <campaign id> is where a campaign's commands are published.
	CampaignCommandPrefix = "maint.campaign.cmd."
	// CampaignEventPrefix + <campaign id> is where a campaign's events go (stream EventsStream).
	CampaignEventPrefix = "maint.campaign.evt."
	// CampaignEntitiesBucket is the KV bucket of the entities' phases, under <id>.<key>.
	CampaignEntitiesBucket = "campaign-entities"
	// CampaignsBucket is the KV bucket of the campaigns' own state, under <id>.
	CampaignsBucket = "campaigns"
	// CampaignListsBucket is the Object Store bucket of the selections' lists.
	CampaignListsBucket = "campaign-lists"
)

// CampaignCommandSubject is where the commands of campaign id are published.
func CampaignCommandSubject(id string) string { return CampaignCommandPrefix + id }

// CampaignEventSubject is where the events of campaign id are published.
func CampaignEventSubject(id string) string { return CampaignEventPrefix + id }

// CampaignEntityKey is the key of an entity's phase in CampaignEntitiesBucket.
func CampaignEntityKey(id, key string) string { return id + "." + key }
