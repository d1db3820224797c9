// Package policy is the customers' maintenance policies of the README: when maintenance may
// happen on the entities of a scope. It reads and checks policy documents, answers what a
// policy allows, and holds the rules by which the command function enforces one. It does no
// I/O: the store finds the policy in force, this package judges with it.
//
// Semantics, which every replica and every caller share:
//
//   - Scope: /subscriptions/<sub>, /subscriptions/<sub>/resourceGroups/<rg> or a whole
//     resource ID, compared case-insensitively (by key). The most specific scope that covers
//     an entity applies, alone: CandidateKeys lists at most three keys to look up, in order.
//   - Recurrence: an RFC 5545 rule without DTSTART (FREQ DAILY, WEEKLY or MONTHLY; INTERVAL;
//     BYDAY, with ordinals such as 1SA or -1SU under MONTHLY; BYMONTHDAY), evaluated by
//     rrule-go on local dates of the policy's IANA time zone. Every rule is anchored at
//     DTSTART = Monday 1 January 2001 (local), so an INTERVAL counts days, weeks
//     (from Monday) or months from that date, and the same rule means the same dates whoever
//     set it and whenever. WEEKLY needs BYDAY and MONTHLY needs BYDAY or BYMONTHDAY: there is
//     no DTSTART to take a day from.
//   - Occurrence: on each date of the rule, from the local start HH:MM for the window's
//     duration of elapsed time (1h to 24h). Across a daylight-saving change the duration
//     stays elapsed time: 22:00 + 6h on the night the clocks go forward ends at 05:00 local.
//     A start the change skips is read with the offset before the gap (02:30 becomes 03:30
//     summer time); a start that occurs twice is the first (summer time), as RFC 5545 says.
//     An occurrence is [start, end): start inclusive, end exclusive.
//   - Blackouts: local dates, [start's midnight, end's midnight): end exclusive, 1 to 90 days.
//   - A window [s, e) is allowed when it lies inside one occurrence (s ≥ its start, e ≤ its
//     end; two occurrences that touch are not one) or anywhere when there are no windows,
//     and overlaps no blackout.
//   - The 48/32 rule (GKE's): a policy set at now is refused when some 32-day span (32×24h)
//     of [now, now+365×24h) holds less than 48h of allowed time, counting only unbroken
//     stretches of at least 4h (touching occurrences join into one stretch).
//   - Time zones come from the system's database when it has one, else from the copy of Go's
//     embedded in the binary (time/tzdata): the scratch image always uses the embedded one.
//   - A compiled Policy computes the occurrences of a local month once, through rrule-go, and
//     keeps them (up to four years of months); queries then search them without allocating.
package policy

import _ "time/tzdata" // the image is scratch: no zoneinfo on disk
