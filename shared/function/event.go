package function

import (
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/shared/domain"
)

// EventMsg is the message of one outcome event or notice on subject: its body, the id
// JetStream de-duplicates on (Nats-Msg-Id) and the CloudEvents attributes with the same id,
// about the resource source at the time at.
func EventMsg(subject, msgID, ceType, source string, at time.Time, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(domain.HeaderMsgID, msgID)
	domain.SetCloudEventHeaders(m.Header, ceType, msgID, source, at)
	return m
}
