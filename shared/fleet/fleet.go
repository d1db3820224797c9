// Package fleet holds what every reader of the fleet shows the same way (README, One definition
// of every fleet fact): the derived facts of a record at a time (overdue, stuck, conflict, each
// defined once in shared/domain and shared/policy) and the one JSON shape of a record, which
// `maintctl get|list -o json` and the web view's JSON both write.
package fleet

import (
	"time"

	"maintsignals/shared/domain"
	"maintsignals/shared/policy"
)

// InForce is the policy in force for an entity and the stored time of its revision (a
// conflict is a window announced before it); the zero InForce is no policy.
type InForce struct {
	Policy *policy.Policy
	Since  time.Time
}

// Policies are the policies in force by scope key (the last revision of each scope, deletes
// left out).
type Policies map[string]InForce

// For is the policy in force for the entity of key: of the scopes that cover it, the most
// specific that has one (policy.CandidateKeys), as the emitter and the notices function find it.
func (ps Policies) For(key string) InForce {
	if len(ps) == 0 {
		return InForce{}
	}
	for _, k := range policy.CandidateKeys(key) {
		if in, ok := ps[k]; ok {
			return in
		}
	}
	return InForce{}
}

// facts are what a record means at one time, beside its fields.
type facts struct {
	overdue, stuck, conflict bool
	// policy is the scope (resource ID as written) of the customer's policy in force for the
	// entity; "" when none.
	policy string
}

// judge is the facts of r at now: overdue (domain.Record.Overdue), stuck after stuckAfter
// (domain.Record.Stuck) and in conflict with the policy in force (policy.Conflict).
func judge(r domain.Record, now time.Time, stuckAfter time.Duration, in InForce) facts {
	f := facts{overdue: r.Overdue(now), stuck: r.Stuck(now, stuckAfter)}
	if in.Policy != nil {
		f.conflict = policy.Conflict(r, in.Policy, in.Since, now) != ""
		f.policy = in.Policy.Scope().ID
	}
	return f
}

// Record is a record as every reader shows it: the fields of the contract's record with their
// types (lastError a string, "" when none), the entity key, the record's revision in the bucket,
// whether the entity was ever seen and is tracked, and the facts under one name each. What a
// record keeps for exactly-once handling (recent ids, the last event, admission, signatures)
// is left out. Policy is the scope of the customer's policy in force, when one is.
type Record struct {
	ResourceID     string              `json:"resourceId"`
	Key            string              `json:"key"`
	Exists         bool                `json:"exists"`
	Tracked        bool                `json:"tracked"`
	Revision       uint64              `json:"revision"`
	State          domain.State        `json:"state"`
	Updating       bool                `json:"updating"`
	Task           domain.Task         `json:"task"`
	LastError      string              `json:"lastError"`
	Window         *domain.Window      `json:"window,omitempty"`
	Reason         string              `json:"reason,omitempty"`
	StateSince     time.Time           `json:"stateSince,omitzero"`
	UpdatedAt      time.Time           `json:"updatedAt,omitzero"`
	LastCommandID  string              `json:"lastCommandId"`
	LastCommandSeq uint64              `json:"lastCommandSeq"`
	Version        int                 `json:"version"`
	Campaign       *domain.CampaignRef `json:"campaign,omitempty"`
	ForgottenAt    time.Time           `json:"forgottenAt,omitzero"`
	Overdue        bool                `json:"overdue"`
	Stuck          bool                `json:"stuck"`
	Conflict       bool                `json:"conflict"`
	Policy         string              `json:"policy,omitempty"`
}

// View is the shown form of the record r of key at revision rev (0: never seen), with its
// facts at now: overdue, stuck after stuckAfter, and the policy in force in and whether the
// window conflicts with it.
func View(key string, rev uint64, r domain.Record, now time.Time, stuckAfter time.Duration, in InForce) Record {
	f := judge(r, now, stuckAfter, in)
	state := r.State
	if state == "" {
		state = domain.StateNone
	}
	seen := rev != 0 && !r.FenceOnly() // a fence alone: never seen
	forgotten := r.ForgottenAt
	if !seen {
		forgotten = time.Time{}
	}
	return Record{ResourceID: r.ResourceID, Key: key, Exists: seen, Tracked: seen && !r.Forgotten(),
		Revision: rev, State: state, Updating: r.Updating, Task: r.Task, LastError: r.LastError,
		Window: r.Window, Reason: r.Reason, StateSince: r.StateSince, UpdatedAt: r.UpdatedAt,
		LastCommandID: r.LastCommandID, LastCommandSeq: r.LastCommandSeq, Version: r.Version,
		Campaign: r.Campaign, ForgottenAt: forgotten,
		Overdue: f.overdue, Stuck: f.stuck, Conflict: f.conflict, Policy: f.policy}
}
