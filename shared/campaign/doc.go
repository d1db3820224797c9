// Package campaign is the pure core of fleet campaigns: one piece of work announced across
// many entities. From a campaign's spec (package campaignspec reads and checks it) it selects
// its entities, plans their windows, and holds the rules by which a campaign function tracks
// them and obeys its control commands. It does no I/O: the function reads the stores and the
// streams, this package decides, the function publishes what it decided and then writes the
// state it returned.
// The ids of a campaign's commands and the rule by which the command function admits them
// are in package admission, which the command function imports alone.
//
// Semantics, which the campaign function, the CLI and the web view share:
//
//   - Selection: a list (one resource ID a line; blank lines and # comments ignored) and/or
//     prefixes over the tracked entities; a prefix covers an ID equal to it or continuing it
//     with "/", compared by key (case-insensitively). One entry per key, sorted by key: the
//     key order in which the plan places entities. Of IDs that differ only in case, a list
//     keeps the one that sorts first; an entity listed and tracked keeps the list's.
//   - Subscription: the /subscriptions/<sub> prefix of the ID, else the whole ID.
//   - Waves: an entity is in the first wave, in order, that covers it; the last wave without
//     prefixes takes the rest; an entity no wave covers is skipped (NoWave). The plan does
//     not depend on the waves: every wave's windows are on the same slots. A wave opens when
//     every earlier wave is finished and its manual gate approved; until then its entities
//     are not announced, and those whose windows came too near meanwhile are planned again
//     (Replan) when it opens.
//   - Plan: slot k starts at earliest + k·slot; the preferred slot is the first 8 bytes of
//     SHA-256(seed + "/" + key), big-endian, modulo across/slot. From it, the first slot
//     whose window the entity's policy allows, that ends by the deadline, holds fewer than
//     maxPerSlot windows and fewer than maxPerSlotPerSubscription of the subscription, and
//     starts at least the notice in force after its announcement. An entity is announced at
//     start − announceLead, or at once when that has passed, so the notice holds when the
//     notice is at most announceLead and the start is at least Margin + notice after the
//     plan's time; an entity whose notice exceeds announceLead has no slot (NoAllowedSlot).
//   - Announce: the function sends an entity's Pending once now ≥ start − announceLead −
//     Margin (Margin early, so that a tick late it is still stored by start − announceLead),
//     with the id campaign.<id>.<generation>.<16 hex of SHA-256(key)>; a window that would
//     start sooner than Margin/2 + notice from now is planned again instead.
//   - Generations: the campaign starts in generation 1. retry makes a new one for the
//     entities it plans anew; pause with withdraw makes a new one for the entities whose
//     announcement it withdraws (their ids are spent), announced again after resume.
//   - Phases: Observe moves an entity by the outcome events of its commands, Step by time and
//     the campaign's status; done is succeeded, skipped, superseded, cleared or cancelled,
//     finished is done or failed. A rejected or overdue entity is neither: it holds its wave
//     and the campaign's completion until retried, cleared or cancelled.
//   - Exactly once: every command and event has an id that follows from the state it was
//     decided from, so the function publishes first and writes second; after a crash it
//     decides the same again and the copies are dropped by id.
package campaign
