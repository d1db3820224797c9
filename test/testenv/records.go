package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/domain"
)

// RecordBucket returns the bucket that holds the record of an entity key (its cell's) and
// the record's key in it (the located key), for tests that write or read a record raw.
func RecordBucket(t testing.TB, js jetstream.JetStream, key string) (jetstream.KeyValue, string) {
	t.Helper()
	kv, err := js.KeyValue(Context(t, 5*time.Second), domain.CellOf(key).RecordsBucket())
	if err != nil {
		t.Fatal(err)
	}
	return kv, domain.Located(key)
}

// PutRawRecord writes value as the record of key, whatever it holds (a corrupt record, one
// of an older version), and returns its revision.
func PutRawRecord(t testing.TB, js jetstream.JetStream, key string, value []byte) uint64 {
	t.Helper()
	kv, loc := RecordBucket(t, js, key)
	rev, err := kv.Put(Context(t, 5*time.Second), loc, value)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// RecordSubject is the subject of key's record in its cell's bucket, for raw publishes.
func RecordSubject(key string) string { return domain.RecordSubject(key) }
