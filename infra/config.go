// Package infra is the composition root: configuration, logging, clients for
// Redis and the database (real or embedded), and the Wire injector.
package infra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/go-sql-driver/mysql"
	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/jwtsession"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// Queue drivers.
const (
	QueueChannel = "channel"
	QueueStream  = "stream"
)

// Config is read once from the environment at start, validated, and passed down.
type Config struct {
	PayWindow     time.Duration `env:"SECKILL_PAY_WINDOW" envDefault:"15m" help:"an order must be paid within this time of its claim, or it expires and its unit returns (0 = never)"`
	PaymentSecret string        `env:"SECKILL_PAYMENT_SECRET" help:"the key of the HMAC-SHA256 in X-Seckill-Signature of POST /payments/notify (at least 16 bytes)"`
	// Off, a cancelled order still counts toward the buyer's one order, so lapsing orders cannot hold the stock.
	ReclaimAfterCancel bool `env:"SECKILL_RECLAIM_AFTER_CANCEL" envDefault:"false" help:"true lets the buyer of a cancelled or expired order claim the voucher again (a new order)"`
	// Empty: a random key kept in Redis (SET NX); a Redis that loses it voids the tickets and passes out.
	RoomSecret string `env:"SECKILL_ROOM_SECRET" help:"the key of the HMAC that signs waiting-room tickets and passes (at least 32 bytes)"`
	JWT
	Tuning
	HTTPAddr     string `env:"SECKILL_HTTP_ADDR" envDefault:"127.0.0.1:8080" help:"listen address"`
	HTTPMaxConns int    `env:"SECKILL_HTTP_MAX_CONNS" envDefault:"0" help:"most open API connections"` // 0: from the file limit
	// RedisURL and RedisClusterAddrs both empty: an embedded miniredis.
	RedisURL          string        `env:"SECKILL_REDIS_URL" help:"one Redis node: redis://host:port/db"`
	RedisClusterAddrs []string      `env:"SECKILL_REDIS_CLUSTER_ADDRS" envSeparator:"," help:"a Redis Cluster's seed nodes, host:port,host:port,... (exclusive with SECKILL_REDIS_URL)"`
	RedisWaitReplicas int           `env:"SECKILL_REDIS_WAIT_REPLICAS" envDefault:"0" help:"replicas of its master that must hold a claim before it answers success (Redis WAIT); 0 = off"`
	RedisWaitTimeout  time.Duration `env:"SECKILL_REDIS_WAIT_TIMEOUT" envDefault:"500ms" help:"how long a claim waits for those replicas; unconfirmed → 503 outcome_unknown"`
	// MySQLDSN empty runs embedded SQLite under DataDir.
	MySQLDSN string `env:"SECKILL_MYSQL_DSN" help:"user:pass@tcp(host:port)/db?parseTime=true (times are kept in UTC)"`
	DataDir  string `env:"SECKILL_DATA_DIR" envDefault:"./data" help:"where the embedded SQLite lives"`
	Queue    string `env:"SECKILL_QUEUE" envDefault:"stream" help:"queue driver: stream or channel"`
	// 500: a commit's fixed cost dwarfs its per-row cost (docs/BENCHMARKS.md).
	BatchSize     int           `env:"SECKILL_BATCH_SIZE" envDefault:"500" help:"most orders per MySQL transaction (one writer makes the biggest batches)"`
	Consumer      string        `env:"SECKILL_CONSUMER" help:"this instance's consumer name in the group (stable, unique per instance)"` // default: derived from the host name
	StreamMinIdle time.Duration `env:"SECKILL_STREAM_MIN_IDLE" envDefault:"30s" help:"how long a dead consumer's entry waits before another instance claims it"`
	KeyPrefix     string        `env:"SECKILL_KEY_PREFIX" envDefault:"seckill:" help:"prefix of the gate's Redis keys"`

	Timezone                string        `env:"SECKILL_TIMEZONE" envDefault:"UTC" help:"zone of the original API's zone-less times"`
	ShutdownTimeout         time.Duration `env:"SECKILL_SHUTDOWN_TIMEOUT" envDefault:"20s" help:"graceful shutdown deadline (stream mode: below SECKILL_STREAM_MIN_IDLE)"`
	DevEndpoints            bool          `env:"SECKILL_DEV_ENDPOINTS" envDefault:"false" help:"mount POST /dev/tokens (make run sets it)"`
	DevEndpointsOnRealRedis string        `env:"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS" help:"i-understand-anyone-can-log-in-as-anyone: the dev endpoint on a real Redis"`
	AdminUsers              string        `env:"SECKILL_ADMIN_USERS" help:"comma-separated user ids whose token may create vouchers and use admin endpoints (make run: 1)"`
	RateUser                int           `env:"SECKILL_RATE_USER" envDefault:"40" help:"claims + order-status requests one user may make per 2 s window (0 = no limit)"`
	RateIP                  int           `env:"SECKILL_RATE_IP" envDefault:"2000" help:"the same per client IP, higher because users share IPs behind NAT (0 = no limit)"`
	TrustedProxies          string        `env:"SECKILL_TRUSTED_PROXIES" help:"CIDRs (or addresses) of reverse proxies whose X-Forwarded-For / X-Real-IP name the client"`
	LogLevel                string        `env:"SECKILL_LOG_LEVEL" envDefault:"info" help:"zerolog level (one line per HTTP request at debug)"`
	LogFormat               string        `env:"SECKILL_LOG_FORMAT" envDefault:"json" help:"json or console"`
	// Loopback by default: the figures are business data. "off" (or empty) disables it.
	MetricsAddr string `env:"SECKILL_METRICS_ADDR" envDefault:"127.0.0.1:9090" help:"where /metrics is served, apart from the API"`
	Tracing     TracingConfig
}

// LoadConfig reads and validates the environment.
func LoadConfig() (Config, error) { return LoadConfigFrom(env.ToMap(os.Environ())) }

// LoadConfigFrom reads and validates vars instead of the environment; every bad
// variable is reported in one error, each as "VARIABLE: what is wrong".
func LoadConfigFrom(vars map[string]string) (Config, error) {
	c := Config{Tuning: DefaultTuning()}
	var p problems
	if err := env.ParseWithOptions(&c, env.Options{Environment: vars}); err != nil {
		p.parseErrors(err, vars)
	}
	c.Consumer = cmp.Or(c.Consumer, defaultConsumer())
	c.RedisClusterAddrs = nonBlank(c.RedisClusterAddrs) // empty (refused by check) when all were blank
	c.check(&p)
	if err := p.err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// problems gathers what is wrong, one line per variable. A variable that did
// not parse is reported once, and its checks (of a zero value) are skipped.
type problems struct {
	list     []string
	unparsed map[string]bool
}

type rule struct {
	name string
	bad  bool
	msg  string
}

func (p *problems) add(name, msg string) {
	if !p.unparsed[name] {
		p.list = append(p.list, name+": "+msg)
	}
}

func (p *problems) report(rules ...rule) {
	for _, r := range rules {
		if r.bad {
			p.add(r.name, r.msg)
		}
	}
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return errors.New("invalid configuration:\n  " + strings.Join(p.list, "\n  "))
}

// parseErrors rewrites the env library's errors as "VARIABLE: want <kind>, got <value>".
func (p *problems) parseErrors(err error, vars map[string]string) {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		p.list = append(p.list, err.Error())
		return
	}
	if p.unparsed == nil {
		p.unparsed = map[string]bool{}
	}
	for _, e := range agg.Errors {
		var pe env.ParseError
		f, ok := reflect.StructField{}, false
		if errors.As(e, &pe) {
			f, ok = reflect.TypeOf(Config{}).FieldByName(pe.Name)
		}
		if !ok {
			p.list = append(p.list, e.Error())
			continue
		}
		name := f.Tag.Get("env")
		p.add(name, fmt.Sprintf("want %s, got %q", kindOf(pe.Type), vars[name]))
		p.unparsed[name] = true
	}
}

func kindOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Duration(0)):
		return "a duration such as 200ms, 30s or 1m"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "a whole number"
	default: // Config holds no unsigned or float setting
		return "a " + t.String()
	}
}

// DefaultConfig is the configuration of an empty environment.
func DefaultConfig() Config {
	c, err := LoadConfigFrom(map[string]string{})
	if err != nil {
		panic(fmt.Sprintf("infra: defaults do not validate: %v", err))
	}
	return c
}

// Validate checks every setting and names the variable at fault.
func (c Config) Validate() error {
	var p problems
	c.check(&p)
	return p.err()
}

// nonBlank trims each item in place and drops the blank ones; nil stays nil.
func nonBlank(items []string) []string {
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return slices.DeleteFunc(items, func(s string) bool { return s == "" })
}

func within(name string, v, lo, hi int) rule {
	return rule{name, v < lo || v > hi, fmt.Sprintf("must be within %d..%d, got %d", lo, hi, v)}
}

// minPaymentSecret: a shorter secret can be guessed offline from one signed notification.
const minPaymentSecret = 16

// check hides the embedded parts' (Tuning, JWT) methods, so it calls each.
func (c Config) check(p *problems) {
	_, _, addrErr := net.SplitHostPort(c.HTTPAddr)
	_, redisErr := redis.ParseURL(c.RedisURL)
	p.report(
		rule{"SECKILL_HTTP_ADDR", addrErr != nil, fmt.Sprintf("want host:port, got %q", c.HTTPAddr)},
		rule{"SECKILL_HTTP_MAX_CONNS", c.HTTPMaxConns != 0 && (c.HTTPMaxConns < minConns || c.HTTPMaxConns > 10_000_000),
			fmt.Sprintf("must be 0 (derived from the open-file limit) or within %d..10000000, got %d", minConns, c.HTTPMaxConns)},
		rule{"SECKILL_REDIS_URL", c.RedisURL != "" && redisErr != nil, fmt.Sprintf("want redis://host:port/db: %v", redisErr)},
	)
	for _, a := range c.RedisClusterAddrs {
		_, port, err := net.SplitHostPort(a)
		p.report(rule{"SECKILL_REDIS_CLUSTER_ADDRS", err != nil || port == "", fmt.Sprintf("want host:port,host:port,..., got %q", a)})
	}
	_, dsnErr := mysql.ParseDSN(c.MySQLDSN)
	_, adminsErr := parseAdmins(c.AdminUsers)
	_, proxiesErr := parseProxies(c.TrustedProxies)
	_, zoneErr := time.LoadLocation(c.Timezone)
	_, levelErr := zerolog.ParseLevel(strings.ToLower(c.LogLevel))
	refused := c.devEndpointsRefused()
	_, metricsPort, metricsErr := net.SplitHostPort(c.MetricsAddr)
	p.report(
		rule{"SECKILL_REDIS_CLUSTER_ADDRS", c.RedisClusterAddrs != nil && len(c.RedisClusterAddrs) == 0, "names no node"},
		rule{"SECKILL_REDIS_CLUSTER_ADDRS", c.RedisClusterAddrs != nil && c.RedisURL != "",
			"and SECKILL_REDIS_URL are both set; set SECKILL_REDIS_CLUSTER_ADDRS for a Redis Cluster or SECKILL_REDIS_URL for one node, not both"},
		rule{"SECKILL_MYSQL_DSN", c.MySQLDSN != "" && dsnErr != nil, fmt.Sprintf("want user:pass@tcp(host:port)/db?parseTime=true: %v", dsnErr)},
		rule{"SECKILL_DATA_DIR", c.MySQLDSN == "" && strings.TrimSpace(c.DataDir) == "", "must not be empty when SECKILL_MYSQL_DSN is empty"},
		rule{"SECKILL_QUEUE", c.Queue != QueueChannel && c.Queue != QueueStream,
			fmt.Sprintf("want %q or %q, got %q", QueueChannel, QueueStream, c.Queue)},
		within("SECKILL_REDIS_WAIT_REPLICAS", c.RedisWaitReplicas, 0, 16),
		rule{"SECKILL_REDIS_WAIT_TIMEOUT", c.RedisWaitTimeout < time.Millisecond || c.RedisWaitTimeout > 1500*time.Millisecond,
			fmt.Sprintf("must be within 1ms..1.5s (inside the claim's 2 s budget), got %s", c.RedisWaitTimeout)},
		rule{"SECKILL_REDIS_WAIT_REPLICAS", c.RedisWaitReplicas > 0 && !c.RealRedis(),
			"needs a real Redis with replicas (SECKILL_REDIS_URL or SECKILL_REDIS_CLUSTER_ADDRS); the embedded one has none"},
		within("SECKILL_BATCH_SIZE", c.BatchSize, 1, 5000),
		rule{"SECKILL_CONSUMER", c.Consumer == "" || strings.ContainsAny(c.Consumer, " \t\n"),
			fmt.Sprintf("must be non-empty without spaces, got %q", c.Consumer)},
		rule{"SECKILL_STREAM_MIN_IDLE", c.StreamMinIdle < 100*time.Millisecond, fmt.Sprintf("must be at least 100ms, got %s", c.StreamMinIdle)},
		rule{"SECKILL_KEY_PREFIX", c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} \t\n"),
			fmt.Sprintf("must be non-empty without braces or spaces, got %q", c.KeyPrefix)},
		rule{"SECKILL_SHUTDOWN_TIMEOUT", c.ShutdownTimeout <= 0, "must be positive"},
		rule{"SECKILL_ADMIN_USERS", adminsErr != nil, fmt.Sprint(adminsErr)},
		rule{"SECKILL_RATE_USER", c.RateUser < 0, fmt.Sprintf("must not be negative (0 = no limit), got %d", c.RateUser)},
		rule{"SECKILL_RATE_IP", c.RateIP < 0, fmt.Sprintf("must not be negative (0 = no limit), got %d", c.RateIP)},
		rule{"SECKILL_TRUSTED_PROXIES", proxiesErr != nil, fmt.Sprint(proxiesErr)},
		rule{"SECKILL_SHUTDOWN_TIMEOUT", c.Queue == QueueStream && c.ShutdownTimeout > 0 && c.ShutdownTimeout >= c.StreamMinIdle,
			fmt.Sprintf("must be below SECKILL_STREAM_MIN_IDLE (%s), got %s: "+
				"other instances would take over orders this one is still draining", c.StreamMinIdle, c.ShutdownTimeout)},
		rule{"SECKILL_DEV_ENDPOINTS", c.DevEndpoints && refused != "", refused},
		rule{"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS", c.DevEndpointsOnRealRedis != "" && c.DevEndpointsOnRealRedis != DevEndpointsAck,
			fmt.Sprintf("want %q (or unset), got %q", DevEndpointsAck, c.DevEndpointsOnRealRedis)},
		rule{"SECKILL_TIMEZONE", zoneErr != nil, fmt.Sprintf("unknown zone %q", c.Timezone)},
		rule{"SECKILL_LOG_LEVEL", levelErr != nil || c.LogLevel == "", fmt.Sprintf("want debug, info, warn or error, got %q", c.LogLevel)},
		rule{"SECKILL_LOG_FORMAT", c.LogFormat != "json" && c.LogFormat != "console", fmt.Sprintf("want json or console, got %q", c.LogFormat)},
		rule{"SECKILL_PAY_WINDOW", c.PayWindow < 0 || (c.PayWindow > 0 && c.PayWindow < time.Second) || c.PayWindow > 7*24*time.Hour,
			fmt.Sprintf("must be 0 (never expire) or within 1s..168h, got %s", c.PayWindow)},
		rule{"SECKILL_PAYMENT_SECRET", c.PaymentSecret != "" && len(c.PaymentSecret) < minPaymentSecret,
			fmt.Sprintf("must be at least %d bytes (or empty: payments off)", minPaymentSecret)},
		rule{"SECKILL_ROOM_SECRET", c.RoomSecret != "" && len(c.RoomSecret) < application.MinRoomKey,
			fmt.Sprintf("must be at least %d bytes (or empty: a key kept in Redis)", application.MinRoomKey)},
	)
	c.Tuning.check(p, c.RedisCluster())
	p.report(
		rule{"SECKILL_METRICS_ADDR", c.MetricsEnabled() && metricsErr != nil, fmt.Sprintf("want host:port or off, got %q", c.MetricsAddr)},
		rule{"SECKILL_METRICS_ADDR", c.MetricsEnabled() && metricsErr == nil && c.MetricsAddr == c.HTTPAddr && metricsPort != "0",
			fmt.Sprintf("must differ from SECKILL_HTTP_ADDR (%s): metrics are not served on the API listener", c.HTTPAddr)},
	)
	c.Tracing.check(p)
	c.JWT.check(p)
}

// DevEndpointsAck lets the dev token endpoint run on a real Redis: a sentence nobody copies by accident.
const DevEndpointsAck = "i-understand-anyone-can-log-in-as-anyone"

// devEndpointsRefused says why the dev token endpoint may not run here (a real Redis), or "".
func (c Config) devEndpointsRefused() string {
	if !c.RealRedis() || c.DevEndpointsOnRealRedis == DevEndpointsAck {
		return ""
	}
	which := "SECKILL_REDIS_URL"
	if c.RedisCluster() {
		which = "SECKILL_REDIS_CLUSTER_ADDRS"
	}
	return fmt.Sprintf("the dev token endpoint mints a login for any user, admins included, in the Redis at %s, "+
		"whatever SECKILL_HTTP_ADDR is (a reverse proxy on this machine reaches a loopback listener too); "+
		"it runs on the embedded Redis (%s empty) or, on a test Redis nothing else trusts, "+
		"with SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS=%s", which, which, DevEndpointsAck)
}

// defaultConsumer is stable across restarts, so a restarted instance re-reads its own pending entries.
func defaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "seckill-" + strings.NewReplacer(" ", "-", "\t", "-", "\n", "-").Replace(host)
}

// Location is the zone of the original API's zone-less times.
func (c Config) Location() *time.Location {
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// parseList parses each comma-separated item of s, blanks around it trimmed.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []T
	for _, part := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func parseAdmins(s string) ([]domain.UserID, error) {
	return parseList(s, func(part string) (domain.UserID, error) {
		n, err := strconv.ParseInt(part, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want comma-separated positive user ids like 1,42, got %q in %q", part, s)
		}
		return domain.UserID(n), nil
	})
}

// parseProxies reads CIDRs or bare addresses.
func parseProxies(s string) ([]netip.Prefix, error) {
	return parseList(s, func(part string) (netip.Prefix, error) {
		if p, err := netip.ParsePrefix(part); err == nil {
			return p.Masked(), nil
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("want comma-separated CIDRs like 10.0.0.0/8,::1/128, got %q", part)
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	})
}

// Admins are the users allowed on admin endpoints; none when unparsable.
func (c Config) Admins() []domain.UserID {
	ids, _ := parseAdmins(c.AdminUsers)
	return ids
}

// Proxies are the trusted reverse proxies; none when unparsable.
func (c Config) Proxies() []netip.Prefix {
	ps, _ := parseProxies(c.TrustedProxies)
	return ps
}

// Embedded reports which backends run in-process.
func (c Config) Embedded() (redis, db bool) { return !c.RealRedis(), c.MySQLDSN == "" }

// RealRedis reports whether a Redis server (node or cluster) is named.
func (c Config) RealRedis() bool { return c.RedisURL != "" || c.RedisCluster() }

func (c Config) RedisCluster() bool { return len(c.RedisClusterAddrs) > 0 }

// redisForLog names the Redis server without its password.
func (c Config) redisForLog() string {
	if c.RedisURL == "" {
		return "embedded"
	}
	opt, err := redis.ParseURL(c.RedisURL)
	if err != nil {
		return "(unparsable)"
	}
	user := ""
	if opt.Username != "" {
		user = opt.Username + "@"
	}
	return fmt.Sprintf("redis://%s%s/%d", user, opt.Addr, opt.DB)
}

// dbForLog names the database without its password.
func (c Config) dbForLog() string {
	if c.MySQLDSN == "" {
		return "sqlite:" + filepath.Join(c.DataDir, "seckill.db")
	}
	cfg, err := mysql.ParseDSN(c.MySQLDSN)
	if err != nil {
		return "(unparsable)"
	}
	return fmt.Sprintf("mysql://%s@%s(%s)/%s", cfg.User, cfg.Net, cfg.Addr, cfg.DBName)
}

// JWT: sessions from the shop's own identity provider, accepted as `Authorization: Bearer <JWT>`.
type JWT struct {
	JWKSURL    string `env:"SECKILL_JWT_JWKS_URL" help:"the shop's identity provider's JWKS: Authorization: Bearer <JWT> is accepted beside hmdp's tokens"`
	KeyFile    string `env:"SECKILL_JWT_KEY_FILE" help:"instead of a JWKS URL, a PEM file of the provider's public keys"`
	Issuer     string `env:"SECKILL_JWT_ISSUER" help:"the tokens' iss, checked when set: the provider (unset, the start warns)"`
	Audience   string `env:"SECKILL_JWT_AUDIENCE" help:"the tokens' aud, checked when set: this service at the provider (unset, the start warns)"`
	Algs       string `env:"SECKILL_JWT_ALGS" envDefault:"RS256,ES256" help:"the signature algorithms accepted: asymmetric only (RS*, PS*, ES*, EdDSA)"`
	UserClaim  string `env:"SECKILL_JWT_USER_CLAIM" envDefault:"sub" help:"the claim holding the numeric user id"`
	RolesClaim string `env:"SECKILL_JWT_ROLES_CLAIM" envDefault:"roles" help:"the claim holding the roles (a list of strings, or one)"`
	AdminRole  string `env:"SECKILL_JWT_ADMIN_ROLE" help:"a role in the provider's roles claim that makes its holder an admin (beside SECKILL_ADMIN_USERS)"`
}

// unchecked names the unset issuer and audience, for the start's warning.
func (j JWT) unchecked() []string {
	var out []string
	if j.Issuer == "" {
		out = append(out, "SECKILL_JWT_ISSUER")
	}
	if j.Audience == "" {
		out = append(out, "SECKILL_JWT_AUDIENCE")
	}
	return out
}

func (j JWT) on() bool { return j.JWKSURL != "" || j.KeyFile != "" }

// algs is nil when none is named, which jwtsession reads as its default.
func (j JWT) algs() []string {
	if algs := nonBlank(strings.Split(j.Algs, ",")); len(algs) > 0 {
		return algs
	}
	return nil
}

func (j JWT) check(p *problems) {
	algsErr := jwtsession.CheckAlgs(j.algs())
	u, urlErr := url.Parse(j.JWKSURL)
	const unread = "is set but no token is checked against it: set SECKILL_JWT_JWKS_URL or SECKILL_JWT_KEY_FILE"
	p.report(
		rule{"SECKILL_JWT_ALGS", algsErr != nil, fmt.Sprint(algsErr)},
		rule{"SECKILL_JWT_JWKS_URL", j.JWKSURL != "" && j.KeyFile != "", "is exclusive with SECKILL_JWT_KEY_FILE: name the provider's keys once"},
		rule{"SECKILL_JWT_JWKS_URL", j.JWKSURL != "" && (urlErr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == ""),
			fmt.Sprintf("must be an http(s) URL, got %q", j.JWKSURL)},
		rule{"SECKILL_JWT_ISSUER", !j.on() && j.Issuer != "", unread},
		rule{"SECKILL_JWT_AUDIENCE", !j.on() && j.Audience != "", unread},
		rule{"SECKILL_JWT_ADMIN_ROLE", !j.on() && j.AdminRole != "", unread},
		rule{"SECKILL_JWT_USER_CLAIM", j.on() && j.UserClaim == "", "must name the claim of the user id"},
	)
}

var durationsOnce sync.Once

// NewLogger builds the process logger from the config.
func NewLogger(c Config, w io.Writer) zerolog.Logger {
	// Durations as "20s", not bare numbers; a zerolog global, set once.
	durationsOnce.Do(func() { zerolog.DurationFieldFormat = zerolog.DurationFormatString })
	lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel))
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if c.LogFormat == "console" {
		f, isFile := w.(*os.File)
		colour := isFile && isatty.IsTerminal(f.Fd())
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !colour}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// NewCLILogger is the operator commands' logger: console lines, warnings and errors unless at debug.
func NewCLILogger(c Config, w io.Writer) zerolog.Logger {
	c.LogFormat = "console"
	if lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel)); err != nil || lvl > zerolog.DebugLevel {
		c.LogLevel = "warn"
	}
	return NewLogger(c, w)
}

// go-redis prints pool and dial failures (the caller's error again): they go to zerolog at debug.
var (
	redisLogOnce sync.Once
	redisLogTo   atomic.Pointer[zerolog.Logger]
)

type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l := redisLogTo.Load(); l != nil {
		l.Debug().Str("component", "go-redis").Msg(fmt.Sprintf(format, v...))
	}
}

// routeRedisLogs points go-redis's process-wide logger at log.
func routeRedisLogs(log zerolog.Logger) {
	redisLogTo.Store(&log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

// DefaultGCPercent is the service's GOGC unless set: the live heap is small and a
// claim's garbage dies young, so fewer collections cost little memory (docs/BENCHMARKS.md).
const DefaultGCPercent = 400

// TuneGC applies DefaultGCPercent unless GOGC is set, and returns the target in force (off: -1).
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}
