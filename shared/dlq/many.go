package dlq

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// Replayed is a dead letter that was sent through again, and where it went.
type Replayed struct {
	Letter Letter
	Ack    *jetstream.PubAck
}

// Replays is what replaying several dead letters did: what was sent again, in order, and the
// sequences that were not in MAINT_DLQ (already replayed, expired or mistyped).
type Replays struct {
	Done    []Replayed
	Missing []uint64
}

// ReplayEach replays the dead letters seqs in their order, or every dead letter, oldest first,
// with all. A sequence that is not there is noted in Missing and the others are replayed all
// the same; a NATS failure stops it, and what was replayed before is still reported.
func ReplayEach(ctx context.Context, js jetstream.JetStream, seqs []uint64, all bool) (Replays, error) {
	return replay(ctx, js, seqs, all, Filter{})
}

// ReplayWhere replays every dead letter f selects (its limit aside), oldest first, as
// ReplayEach does with all.
func ReplayWhere(ctx context.Context, js jetstream.JetStream, f Filter) (Replays, error) {
	f.Limit = 0
	return replay(ctx, js, nil, true, f)
}

func replay(ctx context.Context, js jetstream.JetStream, seqs []uint64, all bool, f Filter) (Replays, error) {
	// The list names the command of each sequence (and is the work of all).
	letters, _, err := ListWhere(ctx, js, f)
	if err != nil {
		return Replays{}, err
	}
	bySeq := make(map[uint64]Letter, len(letters))
	for _, l := range letters {
		bySeq[l.Seq] = l
		if all {
			seqs = append(seqs, l.Seq)
		}
	}
	var r Replays
	for _, seq := range seqs {
		ack, err := Replay(ctx, js, seq)
		if errors.Is(err, ErrNotFound) {
			r.Missing = append(r.Missing, seq)
			continue
		}
		if ack != nil {
			r.Done = append(r.Done, Replayed{Letter: bySeq[seq], Ack: ack})
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// Command is what can be read of the letter's command (resource ID, task, id); of a webhook
// delivery, the resource ID and task of its event.
func (l Letter) Command() domain.Command {
	if l.Subscription != "" {
		var ev struct {
			ResourceID string      `json:"resourceId"`
			Task       domain.Task `json:"task"`
		}
		_ = json.Unmarshal(l.Body, &ev)
		return domain.Command{ResourceID: ev.ResourceID, Task: ev.Task}
	}
	cmd, _ := domain.DecodeCommand(l.Body, l.Key, "")
	return cmd
}
