package partition

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/test/testenv"
)

// PublisherEnv names the variable that makes a test binary of this package run as a load
// publisher (its value is the PublisherConfig as JSON) instead of running tests: a publisher
// must be a process of its own to live in a namespace of its own.
const PublisherEnv = "MAINT_PARTITION_PUBLISHER"

// PublisherConfig is what one publisher process sends.
type PublisherConfig struct {
	Servers    string        // comma-separated URLs it may connect to
	IDPrefix   string        // prefix of its command ids, unique per publisher and run
	Entities   []string      // resource IDs it sends commands for
	Rate       float64       // commands per second
	Duration   time.Duration // how long it sends
	Seed       uint64        // of the random commands
	AckTimeout time.Duration // how long it waits for each PubAck
	Out        string        // file of its PubRecords, one JSON document a line
}

// Publish results.
const (
	ResultAcked   = "acked"
	ResultError   = "error"
	ResultTimeout = "timeout"
)

// PubRecord is what a publisher learnt of one command it sent.
type PubRecord struct {
	ID        string    `json:"id"`
	Sent      time.Time `json:"sent"`
	Result    string    `json:"result"`
	At        time.Time `json:"at"`
	Err       string    `json:"err,omitempty"`
	Seq       uint64    `json:"seq,omitempty"`
	Duplicate bool      `json:"duplicate,omitempty"`
}

// RunPublisher sends commands at a steady rate, as an integrator does: each with its id as
// Nats-Msg-Id, without waiting for one PubAck before sending the next, and no retry (so that
// the records show what a publisher learns during a partition). Every command sent gets one
// record: acknowledged, an error, or no PubAck within AckTimeout.
func RunPublisher(cfg PublisherConfig) error {
	out, err := os.Create(cfg.Out)
	if err != nil {
		return err
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	var mu sync.Mutex
	write := func(r PubRecord) {
		b, _ := json.Marshal(r)
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(b, '\n'))
	}

	// Pings every 2 s: a publisher whose node is cut off moves to another node, if it knows
	// one, within seconds.
	// The servers are tried in the order given, so that a test decides which node each
	// publisher is on.
	nc, err := nats.Connect(cfg.Servers, nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.AckTimeout), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	n := int(cfg.Rate * cfg.Duration.Seconds())
	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(cfg.Seed, 11)), n, cfg.Entities)
	fmt.Println("publisher started:", n, "commands at", cfg.Rate, "per second")

	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	for i, c := range cmds {
		// On schedule from the start, so that a stalled publish does not lower the rate.
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		c.ID = cfg.IDPrefix + "-" + c.ID
		rec := PubRecord{ID: c.ID, Sent: time.Now()}
		f, err := js.PublishMsgAsync(testenv.CommandMsg(c))
		if err != nil {
			rec.Result, rec.At, rec.Err = ResultError, time.Now(), err.Error()
			write(rec)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case ack := <-f.Ok():
				rec.Result, rec.Seq, rec.Duplicate = ResultAcked, ack.Sequence, ack.Duplicate
			case err := <-f.Err():
				rec.Result, rec.Err = ResultError, err.Error()
				if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
					rec.Result = ResultTimeout
				}
			case <-time.After(cfg.AckTimeout + 5*time.Second):
				// The client's own timeout did not fire: the publisher still learns it.
				rec.Result, rec.Err = ResultTimeout, "no PubAck and no error"
			}
			rec.At = time.Now()
			write(rec)
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println("publisher done")
	return nil
}

// ReadPubRecords reads the records a publisher wrote.
func ReadPubRecords(path string) ([]PubRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []PubRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r PubRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
