package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// Shards of a tick (README, Sharing a tick): the emission of one tick, and the notices run of
// one tick, are split into shards by a hash of the entity key. Each shard has a durable
// consumer of the ticks per function, pinned to one replica at a time, so that every shard of
// every tick is served by exactly one replica.
const (
	// DefaultShards is the shard count of `maintctl provision` without --emitter-shards.
	DefaultShards = 4
	// MaxShards bounds the shard count: a shard reads whole cells (Layout), so the count
	// divides Cells.
	MaxShards = Cells
	// EmitterShardPrefix and NoticesShardPrefix name the shard consumers on MAINT_SCHEDULE:
	// emitter-s0, emitter-s1, …, notices-s0, ….
	EmitterShardPrefix = EmitterConsumer + "-s"
	NoticesShardPrefix = NoticesConsumer + "-s"
	// TickPriorityGroup is the priority group the shard consumers are pulled with.
	TickPriorityGroup = "tick"
	// Metadata keys of a shard consumer: its shard number and the shard count, so that a
	// replica learns its share from the consumer it serves.
	MetaShard  = "maintsignals.shard"
	MetaShards = "maintsignals.shards"
)

// EmitterShardConsumer is the emitter's consumer of shard s.
func EmitterShardConsumer(s int) string { return EmitterShardPrefix + strconv.Itoa(s) }

// NoticesShardConsumer is the notices function's consumer of shard s.
func NoticesShardConsumer(s int) string { return NoticesShardPrefix + strconv.Itoa(s) }

// ShardOf is the shard, of n, that the entity key belongs to: KeyHash modulo n. It depends on
// the key only, so every replica, every function and every run agrees; n ≤ 1 puts everything
// in shard 0.
func ShardOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(KeyHash(key) % uint64(n))
}

// KeyHash is FNV-1a (64 bits) of an entity key, computed without allocating.
func KeyHash(key string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime
	}
	return h
}

// Shard is one share of a tick: number Index of Of.
type Shard struct {
	Index, Of int
}

// String is the value of the attribute cluster.maintenance.emitter.shard.
func (s Shard) String() string { return strconv.Itoa(s.Index) }

// Holds reports whether the entity key belongs to the shard.
func (s Shard) Holds(key string) bool { return ShardOf(key, s.Of) == s.Index }

// HoldsHash reports whether the entity key whose KeyHash is h belongs to the shard.
func (s Shard) HoldsHash(h uint64) bool { return s.Of <= 1 || int(h%uint64(s.Of)) == s.Index }

// ShardMetadata is the metadata provisioning puts on a shard consumer.
func ShardMetadata(s Shard) map[string]string {
	return map[string]string{MetaShard: strconv.Itoa(s.Index), MetaShards: strconv.Itoa(s.Of)}
}

// ShardFromMetadata reads the shard of a consumer from its metadata.
func ShardFromMetadata(consumer string, md map[string]string) (Shard, error) {
	i, err1 := strconv.Atoi(md[MetaShard])
	n, err2 := strconv.Atoi(md[MetaShards])
	if err1 != nil || err2 != nil || !ValidShardCount(n) || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("consumer %s: shard metadata %s=%q %s=%q is not a shard of 1, 2, 4 or %d (run `maintctl provision`)",
			consumer, MetaShard, md[MetaShard], MetaShards, md[MetaShards], Cells)
	}
	return Shard{Index: i, Of: n}, nil
}

// IsShardConsumer reports whether name is a shard consumer of the function whose prefix is
// given (EmitterShardPrefix, NoticesShardPrefix).
func IsShardConsumer(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

// ValidShardCount reports whether n shards can share the cells: n divides Cells.
func ValidShardCount(n int) bool { return n >= 1 && n <= Cells && Cells%n == 0 }
