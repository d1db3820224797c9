// Package campaignspec is a fleet campaign's spec: the document as it is written and sent
// (Document), read strictly and checked into a Spec, its prefixes and its waves' failure
// thresholds. Package campaign plans and runs a campaign from it.
//
// A spec is strict JSON (no unknown, repeated or re-cased key); durations are Go durations
// plus d (24h) and w (168h). Two specs are the same campaign when their canonical forms are
// equal (Spec.Digest): durations and times normalised, the seed filled with the id,
// prefixes lower-cased, sorted and unique. across must be a whole number of slots, and
// the window of the last preferred slot must end by the deadline.
package campaignspec
