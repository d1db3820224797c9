// Package alerts ships the Prometheus alerting rules on the maintenance signal (rules.yml) and
// their promtool unit tests (rules_test.yml). The rules are plain files for a Prometheus to
// load; this package embeds them so that tools and tests read the same bytes.
package alerts

import _ "embed"

// Rules is rules.yml.
//
//go:embed rules.yml
var Rules []byte
