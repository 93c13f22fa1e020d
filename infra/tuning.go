package infra

import (
	"fmt"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// Tuning holds the knobs no operator sets: defaults measured or reasoned
// (the reason beside each), which the bench and the tests change in Go
// (c := DefaultConfig(); c.BatchLinger = 0). removedVariables warns of
// their former SECKILL_* names still set. Validate names a bad one by its
// field (Tuning.Workers).
type Tuning struct {
	// RedisPoolSize is the most Redis connections; a stampede waits for
	// one. 128 holds a 20,000-user bench run without a wait worth seeing.
	RedisPoolSize int
	// RedisTimeout bounds every single wait on Redis: a dial, a read, a
	// write, a wait for a pooled connection. A claim's own budget
	// (application.ClaimBudget) bounds it further. Short, so a node that
	// died or stalled is given up on (and, on a cluster, the slot map
	// reloaded) in about this long, not in go-redis's 5 s defaults.
	RedisTimeout time.Duration
	// RedisAutoPipeline is how the claim path's commands (claim script,
	// session lookup, id lease) reach Redis: "half" batches concurrent
	// claims' commands into one pipeline per round trip (go-redis's
	// automatic pipeliner, half duplex), "full" streams them on one held
	// connection per node (full duplex), "off" sends each claim's own.
	// See docs/BENCHMARKS.md for the measurement behind the default.
	RedisAutoPipeline string
	// RedisAutoPipelineDelay is the pipeliner's MaxFlushDelay: how long it
	// may wait for more commands after a flush (0 = flush at once).
	RedisAutoPipelineDelay time.Duration
	// RedisAutoPipelineShards is the pipeliner's NumShards (0 = go-redis's
	// default: one queue on one node, one per CPU on a cluster, routed by
	// slot; with "full" on one node, that many held connections, routed by
	// key).
	RedisAutoPipelineShards int

	// QueueCapacity bounds the channel queue; a full channel answers busy.
	QueueCapacity int
	// BatchLinger: how long a batch waits to fill after its first orders,
	// on both queues. With Workers and SECKILL_BATCH_SIZE: one worker
	// writing batches of up to 500, lingering 20ms for a batch to fill: a
	// commit costs MariaDB about 480µs of CPU whatever its size (plus about
	// 4.7µs per row), and a second worker only splits the same voucher's
	// orders into smaller batches that queue on its stock row lock.
	// Measured in docs/BENCHMARKS.md ("Bigger batches, one writer").
	BatchLinger time.Duration
	Workers     int

	// StreamGroup is the consumer group every instance joins.
	StreamGroup string
	// StreamBlock is one XREADGROUP's wait: short, so that shutdown is
	// honoured within about this (zero would block forever).
	StreamBlock time.Duration
	// MaxDeliveries: deliveries before an entry is dead-lettered (0 = no
	// limit). A restart re-delivers what was in flight, so 1 or 2 would
	// dead-letter sound orders after one or two restarts.
	MaxDeliveries int

	// SoldOutWindow: once Redis answers sold out for a voucher, this
	// instance answers sold out itself for this long, without a Redis round
	// trip: the staleness a returned unit may meet.
	SoldOutWindow time.Duration
	// IDBlock is how many order-id sequence numbers one Redis round trip
	// leases.
	IDBlock int
	// RestoreInterval: how often a running instance checks that every live
	// voucher still has its gate and live-set entry, and rebuilds what Redis
	// lost from the database. 0 turns the check off (restore at start only).
	RestoreInterval time.Duration
	// BucketsAbove: a voucher created with more stock than this and no
	// "buckets" in its request has its stock split into Buckets buckets
	// (docs/SCALING-buckets.md). 0 turns the rule off: an admin asks for
	// buckets per voucher.
	BucketsAbove int
	// Buckets is the rule's K; 0 means the number of Redis Cluster masters
	// counted at start (on a single Redis the rule then splits nothing).
	Buckets int

	// TokenCacheTTL: 0 = no session cache, every request asks Redis (and
	// slides the session's expiry); on a Redis without CLIENT TRACKING, how
	// long a cached entry lives.
	TokenCacheTTL time.Duration
	// TokenCacheSize: sessions the cache holds, the users who log in before
	// a sale (a 120,000-user bench round held 100,000).
	TokenCacheSize int
	// TokenTTL is a session's life, slid on use, as the original's login.
	TokenTTL time.Duration
	// TokenWarm: at start, read the sessions already in Redis into the
	// session cache in the background when Redis tracks (at most
	// TokenCacheSize), so users who logged in before this instance started
	// cost no lookup.
	TokenWarm bool
	// KeyRetention: gate keys expire this long after their sale ends.
	KeyRetention time.Duration
	// RateWindow is the rate limits' sliding window, whole seconds: it is
	// also the Retry-After a limited client is told.
	RateWindow time.Duration
	// Migrate applies the migrations at start; serve --no-migrate turns
	// it off.
	Migrate bool
}

// DefaultTuning is the tuning of every deployment.
func DefaultTuning() Tuning {
	return Tuning{
		RedisPoolSize:     128,
		RedisTimeout:      time.Second,
		RedisAutoPipeline: AutoPipelineHalf,
		QueueCapacity:     65536,
		BatchLinger:       20 * time.Millisecond,
		Workers:           1,
		StreamGroup:       "seckill",
		StreamBlock:       200 * time.Millisecond,
		MaxDeliveries:     10,
		SoldOutWindow:     500 * time.Millisecond,
		IDBlock:           1000,
		RestoreInterval:   5 * time.Second,
		TokenCacheTTL:     10 * time.Second,
		TokenCacheSize:    100_000,
		TokenTTL:          30 * time.Minute,
		TokenWarm:         true,
		KeyRetention:      24 * time.Hour,
		RateWindow:        2 * time.Second,
		Migrate:           true,
	}
}

// Values of Tuning.RedisAutoPipeline.
const (
	AutoPipelineOff  = "off"
	AutoPipelineHalf = "half"
	AutoPipelineFull = "full"
)

// check refuses tuning that would hurt; cluster says whether the service
// runs on a Redis Cluster.
func (t Tuning) check(p *problems, cluster bool) {
	p.report(
		within("Tuning.RedisPoolSize", t.RedisPoolSize, 1, 10_000),
		rule{"Tuning.RedisTimeout", t.RedisTimeout < 50*time.Millisecond || t.RedisTimeout > 30*time.Second,
			fmt.Sprintf("must be within 50ms..30s, got %s", t.RedisTimeout)},
		rule{"Tuning.RedisAutoPipeline", !slices.Contains([]string{AutoPipelineOff, AutoPipelineHalf, AutoPipelineFull}, t.RedisAutoPipeline),
			fmt.Sprintf("want %q, %q or %q, got %q", AutoPipelineHalf, AutoPipelineFull, AutoPipelineOff, t.RedisAutoPipeline)},
		rule{"Tuning.RedisAutoPipelineDelay", t.RedisAutoPipelineDelay < 0 || t.RedisAutoPipelineDelay > 10*time.Millisecond,
			fmt.Sprintf("must be within 0..10ms, got %s", t.RedisAutoPipelineDelay)},
		within("Tuning.RedisAutoPipelineShards", t.RedisAutoPipelineShards, 0, 64),
		// Half-duplex shards flush in parallel, unordered: a release could
		// overtake the claim it undoes.
		rule{"Tuning.RedisAutoPipelineShards", t.RedisAutoPipelineShards > 1 && t.RedisAutoPipeline != AutoPipelineFull && !cluster,
			fmt.Sprintf("more than 1 needs RedisAutoPipeline=full on one node (half-duplex shards lose the order of a claim and its release), got %d", t.RedisAutoPipelineShards)},
		rule{"Tuning.QueueCapacity", t.QueueCapacity < 1, "must be at least 1"},
		rule{"Tuning.BatchLinger", t.BatchLinger < 0 || t.BatchLinger > time.Second, fmt.Sprintf("must be within 0..1s, got %s", t.BatchLinger)},
		within("Tuning.Workers", t.Workers, 1, 64),
		rule{"Tuning.StreamGroup", t.StreamGroup == "", "must not be empty"},
		rule{"Tuning.StreamBlock", t.StreamBlock <= 0 || t.StreamBlock > 10*time.Second,
			fmt.Sprintf("must be within (0, 10s], got %s (0 would block forever)", t.StreamBlock)},
		rule{"Tuning.MaxDeliveries", t.MaxDeliveries < 0 || t.MaxDeliveries == 1 || t.MaxDeliveries == 2,
			fmt.Sprintf("must be 0 (no limit) or at least 3, got %d: "+
				"a restart re-delivers in-flight orders, so a lower limit dead-letters sound ones", t.MaxDeliveries)},
		rule{"Tuning.SoldOutWindow", t.SoldOutWindow <= 0 || t.SoldOutWindow > 10*time.Second,
			fmt.Sprintf("must be within (0, 10s], got %s", t.SoldOutWindow)},
		rule{"Tuning.RestoreInterval", t.RestoreInterval != 0 && (t.RestoreInterval < 100*time.Millisecond || t.RestoreInterval > time.Hour),
			fmt.Sprintf("must be 0 (off) or within 100ms..1h, got %s", t.RestoreInterval)},
		rule{"Tuning.BucketsAbove", t.BucketsAbove < 0, fmt.Sprintf("must be 0 (off) or a stock, got %d", t.BucketsAbove)},
		rule{"Tuning.Buckets", t.Buckets < 0 || t.Buckets > domain.MaxBuckets,
			fmt.Sprintf("must be 0 (the number of cluster masters) or 1..%d, got %d", domain.MaxBuckets, t.Buckets)},
		within("Tuning.IDBlock", t.IDBlock, 1, 1_000_000),
		rule{"Tuning.TokenCacheTTL", t.TokenCacheTTL < 0, fmt.Sprintf("must not be negative (0 = no cache), got %s", t.TokenCacheTTL)},
		rule{"Tuning.TokenCacheSize", t.TokenCacheSize < 1, "must be at least 1"},
		rule{"Tuning.TokenTTL", t.TokenTTL <= 0, "must be positive"},
		rule{"Tuning.KeyRetention", t.KeyRetention <= 0, "must be positive"},
		// Whole seconds: Retry-After is told in seconds, and a sub-second window
		// would tell a client to retry after 0.
		rule{"Tuning.RateWindow", t.RateWindow < time.Second || t.RateWindow > time.Hour || t.RateWindow%time.Second != 0,
			fmt.Sprintf("must be whole seconds within 1s..1h, got %s", t.RateWindow)},
	)
}
