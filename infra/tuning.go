package infra

import (
	"fmt"
	"slices"
	"time"

	"github.com/hmdp-go/seckill/domain"
)

// Tuning holds the knobs no operator sets (the bench and tests set them in Go); Validate names them by field.
type Tuning struct {
	RedisPoolSize int // per node; 128 holds a 20,000-user bench run
	// RedisTimeout bounds every wait on Redis (dial, read, write, pool): short, so a dead node is given up on quickly.
	RedisTimeout time.Duration
	// RedisAutoPipeline is how the claim path's commands reach Redis: "half" batches concurrent claims' commands
	// per round trip, "full" streams them on one held connection per node, "off" sends each claim's own.
	RedisAutoPipeline       string
	RedisAutoPipelineDelay  time.Duration // the pipeliner's MaxFlushDelay (0 = flush at once)
	RedisAutoPipelineShards int           // the pipeliner's NumShards (0 = go-redis's default)
	QueueCapacity           int           // a full channel queue answers busy
	// BatchLinger: how long a batch waits to fill; one lingering worker makes the biggest batches.
	BatchLinger time.Duration
	Workers     int
	StreamGroup string
	StreamBlock time.Duration // one XREADGROUP's wait: short, so shutdown is honoured (0 would block forever)
	// MaxDeliveries before an entry is dead-lettered (0 = no limit); a restart re-delivers what was in flight.
	MaxDeliveries int
	// SoldOutWindow: how long this instance answers sold out itself after Redis did.
	SoldOutWindow   time.Duration
	IDBlock         int           // order ids leased per Redis round trip
	RestoreInterval time.Duration // how often the gates Redis lost are rebuilt from the database (0 = at start only)
	// BucketsAbove: a voucher created with more stock and no "buckets" is split into Buckets buckets (0 = off);
	// Buckets 0 means the number of Redis Cluster masters at start.
	BucketsAbove int
	Buckets      int
	// TokenCacheTTL: 0 = no session cache; on a Redis without CLIENT TRACKING, how long a cached entry lives.
	TokenCacheTTL  time.Duration
	TokenCacheSize int           // a 120,000-user bench round held 100,000
	TokenTTL       time.Duration // a session's life, slid on use
	TokenWarm      bool          // read the sessions already in Redis into the cache at start (when Redis tracks)
	KeyRetention   time.Duration // gate keys expire this long after their sale ends
	RateWindow     time.Duration // whole seconds: it is also the Retry-After told
	Migrate        bool          // serve --no-migrate turns it off
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

// check refuses tuning that would hurt.
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
		// Half-duplex shards flush in parallel, unordered: a release could overtake the claim it undoes.
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
		rule{"Tuning.RateWindow", t.RateWindow < time.Second || t.RateWindow > time.Hour || t.RateWindow%time.Second != 0,
			fmt.Sprintf("must be whole seconds within 1s..1h, got %s", t.RateWindow)},
	)
}
