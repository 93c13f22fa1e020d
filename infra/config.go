// Package infra is the composition root: configuration, logging, clients for
// Redis and the database (real or embedded), and the Wire injectors that build
// one service per queue driver.
package infra

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Queue drivers.
const (
	QueueChannel = "channel"
	QueueStream  = "stream"
)

// Config is read once from the environment at start, validated, and passed down.
type Config struct {
	HTTPAddr string `env:"SECKILL_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// RedisURL empty runs an embedded in-process Redis (miniredis).
	RedisURL string `env:"SECKILL_REDIS_URL"`
	// RedisPoolSize is the most Redis connections; a stampede waits for one.
	RedisPoolSize int `env:"SECKILL_REDIS_POOL_SIZE" envDefault:"128"`
	// MySQLDSN empty runs embedded SQLite under DataDir.
	MySQLDSN string `env:"SECKILL_MYSQL_DSN"`
	DataDir  string `env:"SECKILL_DATA_DIR" envDefault:"./data"`

	Queue         string        `env:"SECKILL_QUEUE" envDefault:"stream"`
	QueueCapacity int           `env:"SECKILL_QUEUE_CAPACITY" envDefault:"65536"`
	BatchSize     int           `env:"SECKILL_BATCH_SIZE" envDefault:"200"`
	BatchLinger   time.Duration `env:"SECKILL_BATCH_LINGER" envDefault:"5ms"`
	Workers       int           `env:"SECKILL_WORKERS" envDefault:"2"`

	// Stream queue settings (SECKILL_QUEUE=stream).
	Consumer      string        `env:"SECKILL_CONSUMER"` // default: derived from the host name
	StreamGroup   string        `env:"SECKILL_STREAM_GROUP" envDefault:"seckill"`
	StreamBlock   time.Duration `env:"SECKILL_STREAM_BLOCK" envDefault:"200ms"`
	StreamMinIdle time.Duration `env:"SECKILL_STREAM_MIN_IDLE" envDefault:"30s"`
	MaxDeliveries int           `env:"SECKILL_MAX_DELIVERIES" envDefault:"10"`

	// SoldOutWindow: once Redis answers sold out for a voucher, this instance
	// answers sold out itself for this long, without a Redis round trip.
	SoldOutWindow  time.Duration `env:"SECKILL_SOLDOUT_WINDOW" envDefault:"500ms"`
	IDBlock        int           `env:"SECKILL_ID_BLOCK" envDefault:"1000"`
	TokenCacheTTL  time.Duration `env:"SECKILL_TOKEN_CACHE_TTL" envDefault:"10s"`
	TokenCacheSize int           `env:"SECKILL_TOKEN_CACHE_SIZE" envDefault:"100000"`
	TokenTTL       time.Duration `env:"SECKILL_TOKEN_TTL" envDefault:"30m"`
	KeyRetention   time.Duration `env:"SECKILL_KEY_RETENTION" envDefault:"24h"`
	// KeyPrefix namespaces the gate's Redis keys, so several deployments (or
	// test runs) can share one Redis.
	KeyPrefix string `env:"SECKILL_KEY_PREFIX" envDefault:"seckill:"`

	Timezone        string        `env:"SECKILL_TIMEZONE" envDefault:"UTC"`
	Migrate         bool          `env:"SECKILL_MIGRATE" envDefault:"true"`
	ShutdownTimeout time.Duration `env:"SECKILL_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	DevEndpoints    bool          `env:"SECKILL_DEV_ENDPOINTS" envDefault:"false"`

	LogLevel  string `env:"SECKILL_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"SECKILL_LOG_FORMAT" envDefault:"json"`

	// MetricsAddr serves /metrics on a listener of its own, loopback by
	// default: the figures are business data. "off" (or empty) disables it.
	MetricsAddr string `env:"SECKILL_METRICS_ADDR" envDefault:"127.0.0.1:9090"`
	// Tracing is off unless the standard OTEL_* variables turn it on.
	Tracing TracingConfig

	location *time.Location
}

// LoadConfig reads and validates the environment.
func LoadConfig() (Config, error) {
	return loadConfig(env.Options{})
}

// LoadConfigFrom reads and validates the given variables instead of the
// process environment.
func LoadConfigFrom(vars map[string]string) (Config, error) {
	return loadConfig(env.Options{Environment: vars})
}

func loadConfig(opts env.Options) (Config, error) {
	var c Config
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", nameVariables(err))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// nameVariables rewrites the env library's parse errors, which name the Go
// field, to name the environment variable a user has to fix.
func nameVariables(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := reflect.TypeOf(Config{}).FieldByName(pe.Name); ok {
				e = fmt.Errorf("%s: want a %s: %w", f.Tag.Get("env"), pe.Type, pe.Err)
			}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// DefaultConfig is the configuration of an empty environment, for callers
// that build a Config in code (tests, the bench) and then change a few fields.
func DefaultConfig() Config {
	c, err := LoadConfigFrom(map[string]string{})
	if err != nil {
		panic(fmt.Sprintf("infra: defaults do not validate: %v", err))
	}
	return c
}

// Validate checks every setting and names the variable at fault.
func (c *Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("SECKILL_HTTP_ADDR", "want host:port, got %q", c.HTTPAddr)
	}
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			bad("SECKILL_REDIS_URL", "want redis://host:port/db: %v", err)
		}
	}
	if c.MySQLDSN != "" {
		if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
			bad("SECKILL_MYSQL_DSN", "want user:pass@tcp(host:port)/db?parseTime=true: %v", err)
		}
	}
	if c.MySQLDSN == "" && strings.TrimSpace(c.DataDir) == "" {
		bad("SECKILL_DATA_DIR", "must not be empty when SECKILL_MYSQL_DSN is empty")
	}
	switch c.Queue {
	case QueueChannel, QueueStream:
	default:
		bad("SECKILL_QUEUE", "want %q or %q, got %q", QueueChannel, QueueStream, c.Queue)
	}
	if c.RedisPoolSize < 1 || c.RedisPoolSize > 10_000 {
		bad("SECKILL_REDIS_POOL_SIZE", "must be within 1..10000, got %d", c.RedisPoolSize)
	}
	if c.QueueCapacity < 1 {
		bad("SECKILL_QUEUE_CAPACITY", "must be at least 1")
	}
	if c.BatchSize < 1 || c.BatchSize > 5000 {
		bad("SECKILL_BATCH_SIZE", "must be within 1..5000, got %d", c.BatchSize)
	}
	if c.BatchLinger < 0 || c.BatchLinger > time.Second {
		bad("SECKILL_BATCH_LINGER", "must be within 0..1s, got %s", c.BatchLinger)
	}
	if c.Workers < 1 || c.Workers > 64 {
		bad("SECKILL_WORKERS", "must be within 1..64, got %d", c.Workers)
	}
	if c.Consumer == "" {
		c.Consumer = defaultConsumer()
	}
	if strings.ContainsAny(c.Consumer, " \t\n") {
		bad("SECKILL_CONSUMER", "must not contain spaces, got %q", c.Consumer)
	}
	if c.StreamGroup == "" {
		bad("SECKILL_STREAM_GROUP", "must not be empty")
	}
	if c.StreamBlock <= 0 || c.StreamBlock > 10*time.Second {
		bad("SECKILL_STREAM_BLOCK", "must be within (0, 10s], got %s (0 would block forever)", c.StreamBlock)
	}
	if c.StreamMinIdle < 100*time.Millisecond {
		bad("SECKILL_STREAM_MIN_IDLE", "must be at least 100ms, got %s", c.StreamMinIdle)
	}
	if c.MaxDeliveries < 0 {
		bad("SECKILL_MAX_DELIVERIES", "must not be negative (0 = no limit)")
	}
	if c.SoldOutWindow <= 0 || c.SoldOutWindow > 10*time.Second {
		bad("SECKILL_SOLDOUT_WINDOW", "must be within (0, 10s], got %s", c.SoldOutWindow)
	}
	if c.IDBlock < 1 || c.IDBlock > 1_000_000 {
		bad("SECKILL_ID_BLOCK", "must be within 1..1000000, got %d", c.IDBlock)
	}
	if c.TokenCacheTTL < 0 {
		bad("SECKILL_TOKEN_CACHE_TTL", "must not be negative")
	}
	if c.TokenCacheSize < 1 {
		bad("SECKILL_TOKEN_CACHE_SIZE", "must be at least 1")
	}
	if c.TokenTTL <= 0 {
		bad("SECKILL_TOKEN_TTL", "must be positive")
	}
	if c.KeyRetention <= 0 {
		bad("SECKILL_KEY_RETENTION", "must be positive")
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} \t\n") {
		bad("SECKILL_KEY_PREFIX", "must be non-empty without braces or spaces, got %q", c.KeyPrefix)
	}
	if c.ShutdownTimeout <= 0 {
		bad("SECKILL_SHUTDOWN_TIMEOUT", "must be positive")
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		bad("SECKILL_TIMEZONE", "unknown zone %q", c.Timezone)
	}
	c.location = loc
	if _, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel)); err != nil || c.LogLevel == "" {
		bad("SECKILL_LOG_LEVEL", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		bad("SECKILL_LOG_FORMAT", "want json or console, got %q", c.LogFormat)
	}
	errs = append(errs, c.validateObservability()...)
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration:\n  %w", errors.Join(errs...))
	}
	return nil
}

// defaultConsumer names this instance in the consumer group after its host,
// so a restarted instance re-reads its own pending entries. Two instances on
// one host must set SECKILL_CONSUMER apart.
func defaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "seckill-" + strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' {
			return '-'
		}
		return r
	}, host)
}

// Location is the zone for the original API's zone-less times.
func (c Config) Location() *time.Location {
	if c.location == nil {
		return time.UTC
	}
	return c.location
}

// Embedded reports which backends run in-process.
func (c Config) Embedded() (redis, db bool) { return c.RedisURL == "", c.MySQLDSN == "" }
