package web

import (
	"fmt"
	"net/http"
	"strings"

	"maintsignals/shared/domain"
)

// operation describes one operation of the document.
type operation struct {
	id, tag, summary, description string
	params                        []any
	ok                            schema // the 200 answer
	more                          schema // other answers, by status
}

func ref(kind, name string) schema { return schema{"$ref": "#/components/" + kind + "/" + name} }

func jsonBody(what string, s any) schema {
	return schema{"description": what, "content": schema{"application/json": schema{"schema": s}}}
}

func (o operation) object() schema {
	responses := schema{"200": o.ok, "400": ref("responses", "BadRequest"), "401": ref("responses", "Unauthorized"),
		"503": ref("responses", "Unavailable"), "default": ref("responses", "Problem")}
	for k, v := range o.more {
		responses[k] = v
	}
	op := schema{"operationId": o.id, "tags": []any{o.tag}, "summary": o.summary, "description": o.description,
		"responses": responses}
	if len(o.params) > 0 {
		op["parameters"] = o.params
	}
	return schema{"get": op}
}

func paths(bodies map[string]any) schema {
	page := []any{ref("parameters", "pageSize"), ref("parameters", "pageToken")}
	key := ref("parameters", "key")
	notFound := schema{"404": ref("responses", "NotFound")}
	return schema{
		"/api/v1/entities": operation{id: "listEntities", tag: "entities", summary: "List the entities",
			description: "The tracked entities in key order, filtered; a walk of every page returns each entity that matched at its first page exactly once, as it was then, whatever changes meanwhile.",
			params:      append(entityFilters(), page...), ok: jsonBody("a page of entities", bodies["entities"])}.object(),
		"/api/v1/entities/{key}": operation{id: "getEntity", tag: "entities", summary: "Get an entity's record",
			description: "The record in its one shape, read from the store now. ETag is the record's revision; If-None-Match with it answers 304.",
			params:      []any{key, ref("parameters", "ifNoneMatch")}, ok: recordBody(bodies["record"]),
			more: schema{"404": ref("responses", "NotFound"), "304": schema{"description": "the record is still at the revision given",
				"headers": schema{"ETag": ref("headers", "ETag")}}}}.object(),
		"/api/v1/entities/{key}/history": operation{id: "listEntityHistory", tag: "entities", summary: "List an entity's outcome events",
			description: "Every outcome of the entity's commands, oldest first, paged.",
			params:      append([]any{key}, page...), ok: jsonBody("a page of outcome events", bodies["history"]), more: notFound}.object(),
		"/api/v1/entities/{key}/notices": operation{id: "listEntityNotices", tag: "entities", summary: "List an entity's notices",
			description: "The entity's lifecycle notices (reminders, due, overdue, stuck, conflict), oldest first, paged.",
			params:      append([]any{key}, page...), ok: jsonBody("a page of notices", bodies["notices"]), more: notFound}.object(),
		"/api/v1/policies": operation{id: "listPolicies", tag: "policies", summary: "List the policies in force",
			description: "The customers' policies in force, by scope key, paged; to a customer, those that bear on its scopes.",
			params:      page, ok: jsonBody("a page of policies", bodies["policies"])}.object(),
		"/api/v1/campaigns": operation{id: "listCampaigns", tag: "campaigns", summary: "List the campaigns",
			description: "The campaigns with their status and phase counts, by id, paged; a customer's token gets a 404.",
			params:      page, ok: jsonBody("a page of campaigns", bodies["campaigns"]), more: notFound}.object(),
		"/api/v1/campaigns/{id}": operation{id: "getCampaign", tag: "campaigns", summary: "Get a campaign",
			description: "A campaign's report, spec and burndown; a customer's token gets a 404.",
			params:      []any{ref("parameters", "campaignId")}, ok: jsonBody("the campaign", bodies["campaign"]), more: notFound}.object(),
		"/api/v1/events":       eventsOperation(bodies),
		"/api/v1/openapi.json": documentOperation(),
		"/api/v1/regions":      regionsOperation(bodies["regions"]),
	}
}

func recordBody(record any) schema {
	b := jsonBody("the record", record)
	b["headers"] = schema{"ETag": ref("headers", "ETag")}
	return b
}

func entityFilters() []any {
	q := func(name, desc string, s schema) schema {
		return schema{"name": name, "in": "query", "required": false, "description": desc, "schema": s}
	}
	str := schema{"type": "string"}
	return []any{
		q("state", fmt.Sprintf("a state (%s; any casing, or its metric value)", domain.States), str),
		q("prefix", "a resource-ID prefix, ending at a path segment, any casing (`/subscriptions/<id>/resourceGroups/rg-1` selects rg-1's entities, never rg-10's)", str),
		q("updating", "true: the entities whose update runs; false: the others", schema{"type": "boolean"}),
		q("windowStartBefore", "the entities whose window starts before this time (RFC 3339)", schema{"type": "string", "format": "date-time"}),
		q("windowStartAfter", "the entities whose window starts after this time (RFC 3339)", schema{"type": "string", "format": "date-time"}),
	}
}

func eventsOperation(bodies map[string]any) schema {
	desc := "Server-sent events: `event: outcome` (data: an outcome event) and `event: notice` (data: a notice), " +
		"of every entity the caller sees, from `since` (default: now). Each `id:` is `e<cell>:<seq>.<position>` or " +
		"`n<cell>:<seq>.<position>`: the stream and sequence of the event, then where the feed stands in every cell's " +
		"events and notices streams; `Last-Event-ID` (which wins over `since`) resumes every stream exactly after it."
	op := operation{id: "streamEvents", tag: "events", summary: "Follow outcome events and notices", description: desc,
		params: []any{
			schema{"name": "since", "in": "query", "required": false, "description": "replay from this time (RFC 3339)", "schema": schema{"type": "string", "format": "date-time"}},
			schema{"name": "Last-Event-ID", "in": "header", "required": false, "description": "the id of the last event received", "schema": schema{"type": "string"}},
		},
		ok: schema{"description": "the stream of events; each event's data is an outcome event or a notice",
			"content": schema{"text/event-stream": schema{"schema": schema{"type": "string"},
				"x-data": schema{"oneOf": []any{bodies["event"], bodies["notice"]}}}}},
	}
	return op.object()
}

func documentOperation() schema {
	op := operation{id: "getDocument", tag: "meta", summary: "This document",
		description: "The OpenAPI 3.1 document of the API.",
		ok:          jsonBody("the document", schema{"type": "object"})}.object()
	return op
}

// regionsOperation is the hub's operation: served at the hub's address, without a token, its
// failure a plain-text 503.
func regionsOperation(view any) schema {
	desc := "Served by the hub (maintctl hub --web-listen), not by the web view: each region's newest summary, " +
		"how old it is by the tick time inside it (stale past two of the region's ticks), the totals over the " +
		"fresh regions and the names of the stale ones."
	op := schema{"operationId": "getRegions", "tags": []any{"regions"}, "summary": "Get the regions' view",
		"description": desc, "security": []any{},
		"responses": schema{"200": jsonBody("the regions' view", view),
			"503": schema{"description": "the view could not be read",
				"content": schema{"text/plain": schema{"schema": schema{"type": "string"}}}}}}
	return schema{"get": op,
		"servers": []any{schema{"url": "/", "description": "the hub's address (maintctl hub --web-listen)"}}}
}

func parameters() schema {
	return schema{
		"pageSize": schema{"name": "pageSize", "in": "query", "required": false, "description": fmt.Sprintf("how many items a page holds at most (1 to %d; 0 or absent: %d)", MaxAPIPageSize, DefaultAPIPageSize),
			"schema": schema{"type": "integer", "minimum": 0, "maximum": MaxAPIPageSize}},
		"pageToken": schema{"name": "pageToken", "in": "query", "required": false, "description": "the nextPageToken of the page before, with the same filter",
			"schema": schema{"type": "string"}},
		"key": schema{"name": "key", "in": "path", "required": true, "description": "the entity key (`maintctl key ID`), its slashes escaped as %2F",
			"schema": schema{"type": "string"}},
		"ifNoneMatch": schema{"name": "If-None-Match", "in": "header", "required": false, "description": "the ETag of the record held",
			"schema": schema{"type": "string"}},
		"campaignId": schema{"name": "id", "in": "path", "required": true, "description": "the campaign's id", "schema": schema{"type": "string"}},
	}
}

func problemResponses() schema {
	out := schema{}
	for name, status := range map[string]int{"BadRequest": http.StatusBadRequest, "Unauthorized": http.StatusUnauthorized,
		"NotFound": http.StatusNotFound, "Unavailable": http.StatusServiceUnavailable, "Problem": 0} {
		what := "a problem (RFC 9457)"
		if status != 0 {
			what = strings.ToLower(http.StatusText(status)) + ": a problem (RFC 9457)"
		}
		out[name] = schema{"description": what, "content": schema{"application/problem+json": schema{"schema": ref("schemas", "Problem")}}}
	}
	return out
}
