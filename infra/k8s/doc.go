// Package k8s holds the Kubernetes deployment of Maintenance Signals: kustomize bases and
// overlays (base, overlays/dev, overlays/prod), an optional component shipping the Grafana
// dashboards (components/dashboards), values for the official NATS Helm chart
// (nats/), and the tests that render them, decode every document strictly and check that
// KEDA's view of the consumers they name is right against a real server.
package k8s
