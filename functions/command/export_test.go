package command

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// DeadlineOf is the campaigns' deadlines as the handler reads them, for the tests.
func DeadlineOf(js jetstream.JetStream) func(context.Context, domain.CampaignRef) (time.Time, error) {
	return (&deadlines{js: js}).Deadline
}
