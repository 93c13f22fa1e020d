package redisgate

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/redisschema"
	"github.com/hmdp-go/seckill/test/testenv"
)

// TestIDShardKeysAreFixed pins the counters' names: every process and every
// version must name shard k's counter alike, or two would lease the same
// numbers. A change here breaks uniqueness for the day it is deployed on.
func TestIDShardKeysAreFixed(t *testing.T) {
	want := [IDShards]string{
		"s00.22", "s01.21", "s02.11", "s03.12", "s04.41", "s05.42", "s06.2", "s07.1",
		"s08.0", "s09.3", "s10.22", "s11.21", "s12.2", "s13.1", "s14.41", "s15.42",
	}
	if idShardTags != want {
		t.Fatalf("shard tags %q, want %q", idShardTags, want)
	}
	for k, tag := range idShardTags {
		if s := int(redisschema.Slot(tag)); s < k*16384/IDShards || s >= (k+1)*16384/IDShards {
			t.Fatalf("shard %d's tag %q has slot %d, outside the shard's sixteenth of the slots", k, tag, s)
		}
	}
	_, rdb := testenv.MiniRedis(t)
	g := NewIDs(rdb, IDOptions{})
	defer g.Close()
	if got, want := g.keys[7]+"2026:12:02", "icr:order:{s07.1}:2026:12:02"; got != want {
		t.Fatalf("shard 7's key %q, want %q", got, want)
	}
}

// The slots the tags were chosen by are the cluster's own (CLUSTER KEYSLOT).
func TestIDShardSlotsAreTheClusters(t *testing.T) {
	rdb := testenv.RedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g := NewIDs(rdb, IDOptions{})
	defer g.Close()
	for k := range IDShards {
		key := g.keys[k] + "2026:12:02"
		got, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(redisschema.Slot(key)); got != want {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, want %d", key, got, want)
		}
	}
}

// A lease names its day in the key of the shard it went to, as the
// original's counter does, and gives the counter its expiry.
func TestIDsLeaseFromTheShardsDayCounterWithExpiry(t *testing.T) {
	m, rdb := testenv.MiniRedis(t)
	g := NewIDs(rdb, IDOptions{Clock: testenv.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))})
	defer g.Close()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := int(id.Seq() >> seqShift)
	key := "icr:order:{" + idShardTags[k] + "}:2025:03:01"
	if got, err := m.Get(key); err != nil || got != strconv.Itoa(DefaultIDBlock) {
		t.Fatalf("counter %s = %q (%v), want one default block leased", key, got, err)
	}
	if ttl := m.TTL(key); ttl != 48*time.Hour {
		t.Fatalf("counter TTL = %s, want 48h", ttl)
	}
	if keys := m.Keys(); len(keys) != 1 {
		t.Fatalf("keys %v, want only the one counter leased", keys)
	}
}

func TestIDShardTurnAlternatesMasters(t *testing.T) {
	for masters := 2; masters <= 6; masters++ {
		master := func(k int) int { return int(redisschema.Slot(idShardTags[k])) * masters / 16384 }
		seen := map[int]bool{}
		same := 0
		for p := range IDShards {
			k, after := p*shardStride%IDShards, (p+1)%IDShards*shardStride%IDShards
			seen[k] = true
			if master(k) == master(after) {
				same++
			}
		}
		if len(seen) != IDShards {
			t.Fatalf("a turn visits %d shards, want %d", len(seen), IDShards)
		}
		if want := map[bool]int{true: 2, false: 0}[masters == 2]; same > want {
			t.Fatalf("%d masters: %d shards in a turn are followed by one on the same master, want at most %d", masters, same, want)
		}
	}
}
