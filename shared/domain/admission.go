package domain

import "time"

// Admission limits how often an entity's record may change: a token bucket of Burst tokens
// refilled at Rate per second, one token per applied command. The bucket lives in the record
// and is advanced by the commands' stored times, not a replica's clock, so the decision is the
// same on every replica and on every redelivery: a command refused once is refused again.
type Admission struct {
	Rate  float64 // tokens per second; 0 or less admits everything
	Burst int
}

// ErrTooMany is the message of a command refused by Admission.
const ErrTooMany = "too many commands for this entity; slow down and send it again"

// Admit reports whether a command stored at storedAt may change r, and the bucket to write
// with it if so.
func (a Admission) Admit(r Record, storedAt time.Time) (tokens float64, ok bool) {
	if a.Rate <= 0 {
		return 0, true
	}
	burst := float64(max(a.Burst, 1))
	tokens = burst
	if !r.AdmitAt.IsZero() {
		tokens = r.AdmitTokens
		if d := storedAt.Sub(r.AdmitAt); d > 0 {
			tokens += d.Seconds() * a.Rate
		}
		tokens = min(tokens, burst)
	}
	if tokens < 1 {
		return tokens, false
	}
	return tokens - 1, true
}

// TooMany is the rejection of a command over the entity's admission.
func TooMany() *Rejection { return reject(CodeRequestNotAllowed, "", ErrTooMany) }
