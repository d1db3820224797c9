package function

import "time"

// What a replica knows of its connection: a reconnect ends what it held, and a server that no
// longer reaches JetStream is left for another.

// moveOffEvery bounds how often a replica leaves its server for another one.
const moveOffEvery = 10 * time.Second

// moveOff connects to another server of the cluster when consumes through this one miss their
// heartbeats: the server answers pings but not for JetStream (it is cut off from the rest of
// the cluster), so waiting on it would leave this replica idle until the partition heals.
func (r *runner) moveOff() {
	if r.js == nil {
		return
	}
	nc := r.js.Conn()
	if len(nc.Servers()) < 2 {
		return // nowhere else to go
	}
	now := time.Now().UnixNano()
	last := r.movedOff.Load()
	if now-last < int64(moveOffEvery) || !r.movedOff.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn("JetStream unreachable through this server; connecting to another", "server", nc.ConnectedUrlRedacted())
	if err := nc.ForceReconnect(); err != nil {
		r.log.Debug("force reconnect", "err", err)
	}
}

// reconnects counts the connection's reconnections: a message that came before the last one
// came on a connection that is gone.
func (r *runner) reconnects() uint64 {
	if r.js == nil {
		return 0 // queues driven without a server (the runtime's own tests)
	}
	return r.js.Conn().Stats().Reconnects
}

func (r *runner) connected() bool { return r.js == nil || r.js.Conn().IsConnected() }
