package domain_test

import (
	"fmt"
	"testing"

	"maintsignals/shared/domain"
)

// The hash is part of the contract between replicas of different versions: a key must land
// in the same shard whatever binary computes it.
func TestShardOf_IsStableAcrossVersions(t *testing.T) {
	for _, tc := range []struct {
		key  string
		n    int
		want int
	}{
		{"subscriptions/s1/resourcegroups/rg/providers/p/c1", 4, 2},
		{"subscriptions/s1/resourcegroups/rg/providers/p/c1", 8, 2},
		{"", 4, 1},  // FNV-1a offset basis 14695981039346656037 mod 4
		{"a", 4, 0}, // 0xaf63dc4c8601ec8c mod 4
		{"a", 7, int(uint64(0xaf63dc4c8601ec8c) % 7)},
		{"anything", 1, 0},
		{"anything", 0, 0},
	} {
		if got := domain.ShardOf(tc.key, tc.n); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
		}
	}
}

func TestShardOf_EveryKeyInExactlyOneShardEvenlySpread(t *testing.T) {
	const keys = 100_000
	for _, n := range []int{1, 2, 3, 4, 8, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			counts := make([]int, n)
			for i := range keys {
				key := domain.MustKey(fmt.Sprintf("/subscriptions/%08x/resourceGroups/rg-%d/providers/Microsoft.RedHatOpenShift/openShiftClusters/c-%d", i/20, i%50, i))
				held := 0
				for s := range n {
					if (domain.Shard{Index: s, Of: n}).Holds(key) {
						held++
						counts[s]++
					}
				}
				if held != 1 {
					t.Fatalf("key %s is held by %d of %d shards", key, held, n)
				}
			}
			for s, c := range counts {
				if share := float64(c) / (keys / float64(n)); share < 0.95 || share > 1.05 {
					t.Errorf("shard %d of %d holds %d keys, %.3f of an even share", s, n, c, share)
				}
			}
		})
	}
}

func TestShardFromMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   map[string]string
		want domain.Shard
		ok   bool
	}{
		{"round trip", domain.ShardMetadata(domain.Shard{Index: 2, Of: 4}), domain.Shard{Index: 2, Of: 4}, true},
		{"single shard", domain.ShardMetadata(domain.Shard{Index: 0, Of: 1}), domain.Shard{Index: 0, Of: 1}, true},
		{"missing", nil, domain.Shard{}, false},
		{"index past count", map[string]string{domain.MetaShard: "4", domain.MetaShards: "4"}, domain.Shard{}, false},
		{"negative", map[string]string{domain.MetaShard: "-1", domain.MetaShards: "4"}, domain.Shard{}, false},
		{"too many", map[string]string{domain.MetaShard: "0", domain.MetaShards: "65"}, domain.Shard{}, false},
		{"not a number", map[string]string{domain.MetaShard: "x", domain.MetaShards: "4"}, domain.Shard{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := domain.ShardFromMetadata("emitter-s0", tc.md)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("got %v, %v; want %v, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestShardConsumerNames(t *testing.T) {
	if got := domain.EmitterShardConsumer(3); got != "emitter-s3" {
		t.Errorf("emitter shard 3: %q", got)
	}
	if got := domain.NoticesShardConsumer(0); got != "notices-s0" {
		t.Errorf("notices shard 0: %q", got)
	}
	for name, want := range map[string]bool{"emitter-s0": true, "emitter-s12": true, "emitter": false, "emitter-s": false, "emitter-sx": false, "notices-s0": false} {
		if got := domain.IsShardConsumer(name, domain.EmitterShardPrefix); got != want {
			t.Errorf("IsShardConsumer(%q) = %v", name, got)
		}
	}
}
