package infra_test

import (
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
		{name: "not_a_number", vars: map[string]string{"SECKILL_WORKERS": "two"}, wantVar: "SECKILL_WORKERS"},
		{name: "block_forever", vars: map[string]string{"SECKILL_STREAM_BLOCK": "0s"}, wantVar: "SECKILL_STREAM_BLOCK"},
		{name: "unknown_zone", vars: map[string]string{"SECKILL_TIMEZONE": "Mars/Olympus"}, wantVar: "SECKILL_TIMEZONE"},
		{name: "bad_level", vars: map[string]string{"SECKILL_LOG_LEVEL": "loud"}, wantVar: "SECKILL_LOG_LEVEL"},
		{name: "prefix_with_hash_tag", vars: map[string]string{"SECKILL_KEY_PREFIX": "a{b}"}, wantVar: "SECKILL_KEY_PREFIX"},
		{name: "cluster_bad_seed", vars: map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": "127.0.0.1:7001,nohost"}, wantVar: "SECKILL_REDIS_CLUSTER_ADDRS"},
		{name: "cluster_and_url", vars: map[string]string{
			"SECKILL_REDIS_CLUSTER_ADDRS": "127.0.0.1:7001", "SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0",
		}, wantVar: "SECKILL_REDIS_URL"},
		{name: "negative_deliveries", vars: map[string]string{"SECKILL_MAX_DELIVERIES": "-1"}, wantVar: "SECKILL_MAX_DELIVERIES"},
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
		"SECKILL_TIMEZONE": "Asia/Shanghai", "SECKILL_BATCH_LINGER": "20ms", "SECKILL_CONSUMER": "node-a",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Location().String() != "Asia/Shanghai" || c.BatchLinger != 20*time.Millisecond || c.Consumer != "node-a" {
		t.Fatalf("config %+v", c)
	}
}

func TestConfigRedisClusterSeeds(t *testing.T) {
	c, err := infra.LoadConfigFrom(map[string]string{
		"SECKILL_REDIS_CLUSTER_ADDRS": "127.0.0.1:7001, 127.0.0.1:7002,127.0.0.1:7003",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	if !c.RedisCluster() || strings.Join(c.RedisClusterAddrs, ",") != strings.Join(want, ",") {
		t.Fatalf("seeds %q, want %q", c.RedisClusterAddrs, want)
	}
	if r, _ := c.Embedded(); r {
		t.Fatal("a named cluster must not run the embedded Redis")
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
