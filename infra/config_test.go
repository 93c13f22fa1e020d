package infra_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/infra"
)

func TestConfigDefaultsAreValid(t *testing.T) {
	c := infra.DefaultConfig()
	if c.HTTPAddr != "127.0.0.1:8080" || c.Queue == "" || c.RedisURL != "" || c.MySQLDSN != "" || c.Consumer == "" {
		t.Fatalf("defaults: %+v", c)
	}
	if r, db := c.Embedded(); !r || !db {
		t.Fatal("no servers configured must mean the embedded default")
	}
	if c.Location() != time.UTC {
		t.Fatalf("default zone %v, want UTC", c.Location())
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		wantVar string
	}{
		{name: "unknown_queue", vars: map[string]string{"SECKILL_QUEUE": "kafka"}, wantVar: "SECKILL_QUEUE"},
		{name: "bad_addr", vars: map[string]string{"SECKILL_HTTP_ADDR": "8080"}, wantVar: "SECKILL_HTTP_ADDR"},
		{name: "bad_redis_url", vars: map[string]string{"SECKILL_REDIS_URL": "http://x"}, wantVar: "SECKILL_REDIS_URL"},
		{name: "bad_dsn", vars: map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306"}, wantVar: "SECKILL_MYSQL_DSN"},
		{name: "zero_batch", vars: map[string]string{"SECKILL_BATCH_SIZE": "0"}, wantVar: "SECKILL_BATCH_SIZE"},
		{name: "not_a_number", vars: map[string]string{"SECKILL_BATCH_SIZE": "two"}, wantVar: "SECKILL_BATCH_SIZE"},
		{name: "min_idle_too_short", vars: map[string]string{"SECKILL_STREAM_MIN_IDLE": "10ms"}, wantVar: "SECKILL_STREAM_MIN_IDLE"},
		{name: "unknown_zone", vars: map[string]string{"SECKILL_TIMEZONE": "Mars/Olympus"}, wantVar: "SECKILL_TIMEZONE"},
		{name: "bad_level", vars: map[string]string{"SECKILL_LOG_LEVEL": "loud"}, wantVar: "SECKILL_LOG_LEVEL"},
		{name: "prefix_with_hash_tag", vars: map[string]string{"SECKILL_KEY_PREFIX": "a{b}"}, wantVar: "SECKILL_KEY_PREFIX"},
		{name: "shutdown_outlasts_min_idle", vars: map[string]string{
			"SECKILL_QUEUE": "stream", "SECKILL_SHUTDOWN_TIMEOUT": "30s", "SECKILL_STREAM_MIN_IDLE": "30s",
		}, wantVar: "SECKILL_SHUTDOWN_TIMEOUT"},
		{name: "dev_endpoints_on_real_redis_and_public_addr", vars: map[string]string{
			"SECKILL_DEV_ENDPOINTS": "true", "SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_HTTP_ADDR": "0.0.0.0:8080",
		}, wantVar: "SECKILL_DEV_ENDPOINTS"},
		{name: "dev_endpoints_on_real_redis_all_interfaces", vars: map[string]string{
			"SECKILL_DEV_ENDPOINTS": "true", "SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0", "SECKILL_HTTP_ADDR": ":8080",
		}, wantVar: "SECKILL_DEV_ENDPOINTS"},
		{name: "unparsable_bool", vars: map[string]string{"SECKILL_DEV_ENDPOINTS": "yes please"}, wantVar: "SECKILL_DEV_ENDPOINTS"},
		// LoadConfig, which serve calls, checked neither (only Validate did).
		{name: "pay_window_sub_second", vars: map[string]string{"SECKILL_PAY_WINDOW": "500ms"}, wantVar: "SECKILL_PAY_WINDOW"},
		{name: "short_payment_secret", vars: map[string]string{"SECKILL_PAYMENT_SECRET": "short"}, wantVar: "SECKILL_PAYMENT_SECRET"},
		{name: "short_room_secret", vars: map[string]string{"SECKILL_ROOM_SECRET": "short"}, wantVar: "SECKILL_ROOM_SECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := infra.LoadConfigFrom(tt.vars)
			if err == nil || !strings.Contains(err.Error(), tt.wantVar) {
				t.Fatalf("err = %v, want one naming %s", err, tt.wantVar)
			}
		})
	}
}

func TestConfigReadsValues(t *testing.T) {
	c, err := infra.LoadConfigFrom(map[string]string{
		"SECKILL_TIMEZONE": "Asia/Shanghai", "SECKILL_STREAM_MIN_IDLE": "45s", "SECKILL_CONSUMER": "node-a",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Location().String() != "Asia/Shanghai" || c.StreamMinIdle != 45*time.Second || c.Consumer != "node-a" ||
		c.Tuning != infra.DefaultTuning() {
		t.Fatalf("config %+v", c)
	}
}

func TestConfigSecuritySettings(t *testing.T) {
	c, err := infra.LoadConfigFrom(map[string]string{
		"SECKILL_ADMIN_USERS": " 1, 42 ", "SECKILL_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1, ::1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Admins(); len(got) != 2 || got[0] != 1 || got[1] != 42 {
		t.Fatalf("admins %v, want [1 42]", got)
	}
	var proxies []string
	for _, p := range c.Proxies() {
		proxies = append(proxies, p.String())
	}
	if strings.Join(proxies, ",") != "10.0.0.0/8,127.0.0.1/32,::1/128" {
		t.Fatalf("proxies %v", proxies)
	}
	if d := infra.DefaultConfig(); len(d.Admins()) != 0 || len(d.Proxies()) != 0 || d.RateUser <= 0 || d.RateIP <= d.RateUser {
		t.Fatalf("defaults: admins %v, proxies %v, rate user %d ip %d", d.Admins(), d.Proxies(), d.RateUser, d.RateIP)
	}

	bad := []struct{ name, key, value, say string }{
		{"admin_not_an_id", "SECKILL_ADMIN_USERS", "1,alice", `"alice"`},
		{"admin_zero", "SECKILL_ADMIN_USERS", "0", `"0"`},
		{"admin_empty_item", "SECKILL_ADMIN_USERS", "1,,2", `""`},
		{"admin_overflow", "SECKILL_ADMIN_USERS", "9223372036854775808", "9223372036854775808"},
		{"proxy_not_a_cidr", "SECKILL_TRUSTED_PROXIES", "10.0.0.0/33", "10.0.0.0/33"},
		{"proxy_host_name", "SECKILL_TRUSTED_PROXIES", "nginx", `"nginx"`},
		{"rate_negative", "SECKILL_RATE_USER", "-1", "SECKILL_RATE_USER"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := infra.LoadConfigFrom(map[string]string{tc.key: tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("err = %v, want one naming %s and %s", err, tc.key, tc.say)
			}
		})
	}
}

// TestConfigReportsEveryBadVariableInOneFormat: an unparsable number does not
// hide a bad value elsewhere, and each line reads "VARIABLE: ..." without the
// Go field or strconv call behind it.
func TestConfigReportsEveryBadVariableInOneFormat(t *testing.T) {
	_, err := infra.LoadConfigFrom(map[string]string{
		"SECKILL_BATCH_SIZE":      "two",
		"SECKILL_STREAM_MIN_IDLE": "soon",
		"SECKILL_QUEUE":           "kafka",
		"SECKILL_RATE_USER":       "-1",
	})
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`SECKILL_BATCH_SIZE: want a whole number, got "two"`,
		`SECKILL_STREAM_MIN_IDLE: want a duration such as 200ms, 30s or 1m, got "soon"`,
		`SECKILL_QUEUE: want "channel" or "stream", got "kafka"`,
		`SECKILL_RATE_USER: must not be negative (0 = no limit), got -1`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	for _, leak := range []string{"strconv", "BatchSize", "parse error on field", "within 1..5000", "at least 100ms"} {
		if strings.Contains(msg, leak) {
			t.Errorf("message has %q (a Go detail, or a check of a value that did not parse):\n%s", leak, msg)
		}
	}
	lines := strings.Split(msg, "\n")
	if len(lines) != 5 || lines[0] != "invalid configuration:" {
		t.Fatalf("want a heading and one line per variable, got:\n%s", msg)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  SECKILL_") {
			t.Errorf("line %q does not start with the variable", l)
		}
	}
}

// The dev endpoint mints a login for anyone in the Redis it runs on: with a
// real Redis (one node or a cluster) it is refused whatever the listen
// address (a reverse proxy on this machine reaches loopback too), unless the
// operator acknowledges it in a variable of its own; `make run` (embedded
// Redis, SECKILL_DEV_ENDPOINTS=true) starts as before.
func TestConfigDevEndpointNeedsEmbeddedRedisOrAnAcknowledgement(t *testing.T) {
	const cluster = "127.0.0.1:7001,127.0.0.1:7002"
	tests := []struct {
		name    string
		vars    map[string]string
		refused bool
	}{
		{name: "cluster_public_addr_refused", vars: map[string]string{
			"SECKILL_REDIS_CLUSTER_ADDRS": cluster, "SECKILL_HTTP_ADDR": "0.0.0.0:8080"}, refused: true},
		{name: "cluster_loopback_refused", vars: map[string]string{
			"SECKILL_REDIS_CLUSTER_ADDRS": cluster, "SECKILL_HTTP_ADDR": "127.0.0.1:8080"}, refused: true},
		{name: "url_loopback_refused", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_HTTP_ADDR": "127.0.0.1:8080"}, refused: true},
		{name: "url_ipv6_loopback_refused", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_HTTP_ADDR": "[::1]:8080"}, refused: true},
		{name: "url_localhost_refused", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0", "SECKILL_HTTP_ADDR": "localhost:8080"}, refused: true},
		{name: "url_public_addr_refused", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_HTTP_ADDR": "0.0.0.0:8080"}, refused: true},
		{name: "url_ack_misspelt_refused", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": "true"}, refused: true},
		{name: "url_acknowledged_accepted", vars: map[string]string{
			"SECKILL_REDIS_URL": "redis://10.0.0.5:6379/0", "SECKILL_HTTP_ADDR": "0.0.0.0:8080",
			"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": devEndpointsAck}},
		{name: "cluster_acknowledged_accepted", vars: map[string]string{
			"SECKILL_REDIS_CLUSTER_ADDRS": cluster, "SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": devEndpointsAck}},
		{name: "embedded_default_accepted", vars: map[string]string{}},
		{name: "embedded_any_addr_accepted", vars: map[string]string{"SECKILL_HTTP_ADDR": "0.0.0.0:8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.vars["SECKILL_DEV_ENDPOINTS"] = "true"
			_, err := infra.LoadConfigFrom(tt.vars)
			if !tt.refused {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("dev endpoint accepted on a real Redis without the acknowledgement")
			}
			if !strings.Contains(err.Error(), "SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS") {
				t.Fatalf("err = %v, want it to name SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS", err)
			}
		})
	}
}

// The acknowledgement means nothing without the dev endpoint, but a wrong
// value is still refused so that a typo never passes for one.
func TestConfigDevEndpointAckAloneNeedsItsExactValue(t *testing.T) {
	if _, err := infra.LoadConfigFrom(map[string]string{"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": devEndpointsAck}); err != nil {
		t.Fatal(err)
	}
	_, err := infra.LoadConfigFrom(map[string]string{"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": "yes"})
	if err == nil || !strings.Contains(err.Error(), devEndpointsAck) {
		t.Fatalf("err = %v, want one naming the value", err)
	}
}

// devEndpointsAck is spelt out, not infra.DevEndpointsAck: the README tells
// operators this value, so changing it is a change of contract.
const devEndpointsAck = "i-understand-anyone-can-log-in-as-anyone"

func TestConfigValidateDoesNotChangeTheConfig(t *testing.T) {
	c := infra.DefaultConfig()
	c.Consumer = ""
	c.Timezone = "Asia/Shanghai"
	before := c
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SECKILL_CONSUMER") {
		t.Fatalf("Validate of an empty consumer: %v, want it refused", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Fatalf("Validate changed the config: %+v, was %+v", c, before)
	}
	if c.Location().String() != "Asia/Shanghai" {
		t.Fatalf("Location %v follows a Timezone set in code? want Asia/Shanghai", c.Location())
	}
}

// TestConfigRedisClusterSeeds: the seeds are the ones written, trimmed, an
// empty entry (a doubled or trailing comma) left out rather than read as a
// node or as a second copy of another.
func TestConfigRedisClusterSeeds(t *testing.T) {
	want := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	for _, v := range []string{
		"127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003",
		"127.0.0.1:7001,,127.0.0.1:7002, ,127.0.0.1:7003,",
	} {
		c, err := infra.LoadConfigFrom(map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": v})
		if err != nil {
			t.Fatal(err)
		}
		if !c.RedisCluster() || !slices.Equal(c.RedisClusterAddrs, want) {
			t.Fatalf("SECKILL_REDIS_CLUSTER_ADDRS=%q: seeds %q, want %q", v, c.RedisClusterAddrs, want)
		}
		if err := c.Validate(); err != nil || !slices.Equal(c.RedisClusterAddrs, want) {
			t.Fatalf("Validate: %v, and the seeds after it %q: it must only read", err, c.RedisClusterAddrs)
		}
		if r, _ := c.Embedded(); r {
			t.Fatal("a named cluster must not run the embedded Redis")
		}
	}
	if _, err := infra.LoadConfigFrom(map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": " , "}); err == nil ||
		!strings.Contains(err.Error(), "names no node") {
		t.Fatalf("only blank seeds: err %v, want one saying they name no node", err)
	}
}

func TestConfigClusterAndURLNamesBoth(t *testing.T) {
	_, err := infra.LoadConfigFrom(map[string]string{
		"SECKILL_REDIS_CLUSTER_ADDRS": "127.0.0.1:7001", "SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0",
	})
	if err == nil || !strings.Contains(err.Error(), "SECKILL_REDIS_CLUSTER_ADDRS") || !strings.Contains(err.Error(), "SECKILL_REDIS_URL") {
		t.Fatalf("err = %v, want one naming both variables", err)
	}
}

// TestConfigRefusesAnUnsafeIdentityProvider: the provider's tokens are
// accepted only with an issuer, an audience and asymmetric algorithms; a
// setting that nothing would read is refused rather than ignored.
func TestConfigRefusesAnUnsafeIdentityProvider(t *testing.T) {
	const jwks = "https://idp.shop.test/.well-known/jwks.json"
	good := map[string]string{"SECKILL_JWT_JWKS_URL": jwks, "SECKILL_JWT_ISSUER": "https://idp.shop.test", "SECKILL_JWT_AUDIENCE": "seckill"}
	if _, err := infra.LoadConfigFrom(good); err != nil {
		t.Fatalf("a sound provider refused: %v", err)
	}
	bad := []struct {
		name, key, value, say string
	}{
		{"alg_none", "SECKILL_JWT_ALGS", "RS256,none", `"none"`},
		{"alg_hmac", "SECKILL_JWT_ALGS", "HS256", `"HS256"`},
		{"alg_unknown", "SECKILL_JWT_ALGS", "RS257", `"RS257"`},
		{"url_and_file", "SECKILL_JWT_KEY_FILE", "/etc/idp.pem", "SECKILL_JWT_JWKS_URL"},
		{"url_not_http", "SECKILL_JWT_JWKS_URL", "idp.shop.test/jwks", "SECKILL_JWT_JWKS_URL"},
		{"role_without_provider", "SECKILL_JWT_JWKS_URL", "", "SECKILL_JWT_AUDIENCE"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"SECKILL_JWT_ADMIN_ROLE": "seckill-admin", tc.key: tc.value}
			for k, v := range good {
				if k != tc.key {
					vars[k] = v
				}
			}
			_, err := infra.LoadConfigFrom(vars)
			if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("err = %v, want one naming %s and %s", err, tc.key, tc.say)
			}
		})
	}
}

// TestTuningIsValidatedByItsField: tuning set in Go that would hurt is
// refused by Validate, named by its field (no variable sets it).
func TestTuningIsValidatedByItsField(t *testing.T) {
	tests := []struct {
		name  string
		set   func(*infra.Tuning)
		field string
	}{
		{name: "block_forever", set: func(t *infra.Tuning) { t.StreamBlock = 0 }, field: "Tuning.StreamBlock"},
		{name: "no_workers", set: func(t *infra.Tuning) { t.Workers = 0 }, field: "Tuning.Workers"},
		{name: "negative_deliveries", set: func(t *infra.Tuning) { t.MaxDeliveries = -1 }, field: "Tuning.MaxDeliveries"},
		{name: "one_delivery", set: func(t *infra.Tuning) { t.MaxDeliveries = 1 }, field: "Tuning.MaxDeliveries"},
		{name: "two_deliveries", set: func(t *infra.Tuning) { t.MaxDeliveries = 2 }, field: "Tuning.MaxDeliveries"},
		{name: "negative_buckets_threshold", set: func(t *infra.Tuning) { t.BucketsAbove = -1 }, field: "Tuning.BucketsAbove"},
		{name: "too_many_buckets", set: func(t *infra.Tuning) { t.Buckets = 17 }, field: "Tuning.Buckets"},
		{name: "negative_token_cache", set: func(t *infra.Tuning) { t.TokenCacheTTL = -time.Second }, field: "Tuning.TokenCacheTTL"},
		{name: "window_sub_second", set: func(t *infra.Tuning) { t.RateWindow = 500 * time.Millisecond }, field: "Tuning.RateWindow"},
		{name: "half_duplex_shards", set: func(t *infra.Tuning) { t.RedisAutoPipelineShards = 4 }, field: "Tuning.RedisAutoPipelineShards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := infra.DefaultConfig()
			tt.set(&c.Tuning)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v, want one naming %s", err, tt.field)
			}
		})
	}
	if err := infra.DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default tuning is refused: %v", err)
	}
}
