package web

import (
	"encoding/json"
	"fmt"
	"time"

	"maintsignals/shared/apischema"
	"maintsignals/shared/campaign"
	"maintsignals/shared/domain"
	"maintsignals/shared/fleet"
	"maintsignals/shared/regions"
)

// The OpenAPI 3.1 document of the API, built from the Go types the handlers encode
// (shared/apischema), so that the two cannot disagree; `go run ./infra/api` writes it to
// infra/api/openapi.json, and a test fails when the committed copy differs.

// APIVersion is the version of the API's document.
const APIVersion = "1.0.0"

type schema = apischema.Schema

// Document is the OpenAPI 3.1 document of the API, indented, with a final newline. The view
// builds it once, when it is made.
func Document() ([]byte, error) {
	r := apischema.New("#/components/schemas/")
	defineEncoded(r)
	r.Qualify["maintsignals/shared/policy"] = "Policy"
	r.Qualify["maintsignals/shared/campaignspec"] = "CampaignSpec"
	r.Qualify["maintsignals/shared/campaign"] = "Campaign"
	r.Qualify["maintsignals/shared/regions"] = "Region"
	bodies := map[string]any{}
	for name, v := range map[string]any{"record": fleet.Record{}, "entities": EntityList{}, "history": EventList{},
		"notices": NoticeList{}, "policies": PolicyList{}, "campaigns": CampaignList{}, "campaign": CampaignPage{},
		"problem": Problem{}, "event": domain.Event{}, "notice": domain.Notice{}, "regions": regions.View{}} {
		s, err := r.Ref(v)
		if err != nil {
			return nil, fmt.Errorf("openapi: %w", err)
		}
		bodies[name] = s
	}
	doc := schema{
		"openapi":  "3.1.0",
		"info":     info(),
		"servers":  []any{schema{"url": "/", "description": "the web view's address (maintctl up --web-listen, maintctl function web)"}},
		"security": []any{schema{}, schema{"bearer": []any{}}, schema{"mutualTLS": []any{}}},
		"tags":     tags(),
		"paths":    paths(bodies),
		"components": schema{
			"schemas":    r.Components,
			"parameters": parameters(),
			"responses":  problemResponses(),
			"headers": schema{"ETag": schema{"description": "the record's revision in the store, quoted",
				"schema": schema{"type": "string"}}},
			"securitySchemes": schema{
				"bearer":    schema{"type": "http", "scheme": "bearer", "description": "the operator's token (--web-token-file) or a customer's (--web-tokens): a customer sees the entities of its scopes alone"},
				"mutualTLS": schema{"type": "mutualTLS", "description": "a client certificate signed by --web-client-ca"},
			},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return append(b, '\n'), nil
}

// defineEncoded gives the schemas of the types that encode themselves, and narrows the
// strings that have a known set of values.
func defineEncoded(r *apischema.Reflector) {
	r.Define(time.Time{}, schema{"type": "string", "format": "date-time"})
	r.Define(domain.Known(0), schema{"type": []any{"boolean", "null"}})
	phases := schema{}
	var names []string
	for _, p := range campaign.Phases {
		phases[string(p)] = schema{"type": "integer", "minimum": 0}
		names = append(names, string(p))
	}
	r.Define(campaign.Counts{}, schema{"type": "object", "properties": phases, "required": names, "additionalProperties": false})
	states := make([]any, len(domain.States))
	for i, s := range domain.States {
		states[i] = string(s)
	}
	r.Define(domain.State(""), schema{"type": "string", "enum": states})
}

func info() schema {
	return schema{
		"title":   "Maintenance Signals read API",
		"version": APIVersion,
		"summary": "The fleet's maintenance records, their history and notices, the policies and campaigns, read-only.",
		"description": "Read-only. Lists are paged (AIP-158): `pageSize` (1 to 1000, default 100) and an opaque " +
			"`pageToken` bound to the filter that began the walk. Errors are RFC 9457 problem details whose `type` is " +
			ProblemBase + "<code> (infra/docs/integrating.md, Problems). A customer's token confines every answer " +
			"to its scopes: another tenant's entity is a 404.",
		"license": schema{"name": "Apache-2.0", "identifier": "Apache-2.0"},
		"contact": schema{"name": "Maintenance Signals", "url": "https://maintsignals.dev"},
	}
}

func tags() []any {
	return []any{
		schema{"name": "entities", "description": "the records of the fleet, their history and notices"},
		schema{"name": "policies", "description": "customers' maintenance policies in force"},
		schema{"name": "campaigns", "description": "fleet campaigns (the operator's alone)"},
		schema{"name": "events", "description": "the live feed of outcome events and notices"},
		schema{"name": "regions", "description": "the regions' view, served by the hub (maintctl hub), not by the web view"},
		schema{"name": "meta", "description": "this document"},
	}
}
