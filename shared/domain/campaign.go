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
	// CampaignEntitiesBucket is the KV bucket of the entities' phases, under
	// <id>.<subscription>.<group>.<key> (CampaignEntityKey): the tenant tokens let the server
	// confine a customer to its own entities' phases.
	CampaignEntitiesBucket = "campaign-entities"
	// CampaignsBucket is the KV bucket of the campaigns' own state, under <id>.
	CampaignsBucket = "campaigns"
	// CampaignListsBucket is the Object Store bucket of the selections' lists.
	CampaignListsBucket = "campaign-lists"
	// CampaignConsumer is the campaign function's durable consumer, on the campaign commands
	// and on the ticks.
	CampaignConsumer = "campaign"
)

// CampaignCommandSubject is where the commands of campaign id are published.
func CampaignCommandSubject(id string) string { return CampaignCommandPrefix + id }

// CampaignEventSubject is where the events of campaign id are published.
func CampaignEventSubject(id string) string { return CampaignEventPrefix + id }

// CampaignEntityKey is the key of an entity's phase in CampaignEntitiesBucket: the campaign
// id, then the entity's located key (Located).
func CampaignEntityKey(id, key string) string { return id + "." + Located(key) }

// CampaignEntityFirstLayout is the key an entity's phase had in the first layout, <id>.<key>
// (moved by `maintctl provision`).
func CampaignEntityFirstLayout(id, key string) string { return id + "." + key }

// MaxCampaignIDLength bounds a campaign id: 1–40 of [a-z0-9-].
const MaxCampaignIDLength = 40

// ValidCampaignID reports whether id is a campaign id: 1–40 of [a-z0-9-].
func ValidCampaignID(id string) bool {
	if id == "" || len(id) > MaxCampaignIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validateCampaign checks the campaign fields: each a campaign id; campaign only on a Pending
// (the campaign rules of the command function check the rest).
func (c *Command) validateCampaign() *Rejection {
	switch {
	case c.Campaign != "" && !ValidCampaignID(c.Campaign):
		return InvalidParameter("campaign", "must be a campaign id, 1-%d characters of [a-z0-9-]", MaxCampaignIDLength)
	case c.Campaign != "" && c.Task != TaskPending:
		return InvalidParameter("campaign", "is allowed only with Pending")
	case c.IfCampaign != "" && !ValidCampaignID(c.IfCampaign):
		return InvalidParameter("ifCampaign", "must be a campaign id, 1-%d characters of [a-z0-9-]", MaxCampaignIDLength)
	}
	return nil
}
