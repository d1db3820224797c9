// Package domain holds the maintenance-signal model: states, tasks, the transition table,
// entity keys, commands, records and outcome events. It has no dependency on NATS or
// OpenTelemetry; every other package builds on it.
package domain

import (
	"slices"
	"strings"
)

// State is the maintenance signal of one entity.
type State string

// The states of the README (States and tasks). An entity never seen is None.
const (
	StateNone                 State = "None"
	StatePending              State = "Pending"
	StatePlanned              State = "Planned"
	StateUnplanned            State = "Unplanned"
	StateCustomerActionNeeded State = "CustomerActionNeeded"
)

// States lists every state in a fixed order (the order metrics are emitted in).
var States = []State{StateNone, StatePending, StatePlanned, StateUnplanned, StateCustomerActionNeeded}

// Valid reports whether s is one of the five states, matched exactly.
func (s State) Valid() bool {
	return slices.Contains(States, s)
}

// MetricValue is the value of the cluster.maintenance.state attribute
// (OpenTelemetry state-metric convention: snake_case).
func (s State) MetricValue() string {
	switch s {
	case StatePending:
		return "pending"
	case StatePlanned:
		return "planned"
	case StateUnplanned:
		return "unplanned"
	case StateCustomerActionNeeded:
		return "customer_action_needed"
	default:
		return "none"
	}
}

// PUCMValue is the value of the state attribute of the ARO-RP compatible
// cluster.maintenance.pucm metric.
func (s State) PUCMValue() string {
	switch s {
	case StatePending:
		return "pending"
	case StatePlanned:
		return "planned"
	case StateUnplanned:
		return "unplanned"
	case StateCustomerActionNeeded:
		return "customerActionNeeded"
	default:
		return "none"
	}
}

// ParseStateLoose accepts a state as a person types it on a command line:
// the exact name, the metric value, or any casing of either.
func ParseStateLoose(s string) (State, bool) {
	for _, v := range States {
		if strings.EqualFold(s, string(v)) || strings.EqualFold(s, v.MetricValue()) || strings.EqualFold(s, v.PUCMValue()) {
			return v, true
		}
	}
	return "", false
}
