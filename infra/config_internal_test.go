package infra

import (
	"strings"
	"testing"
)

func TestStartLineNamesBackendsWithoutPasswords(t *testing.T) {
	c := DefaultConfig()
	c.RedisURL = "redis://app:s3cret-r@10.0.0.5:6380/2"
	c.MySQLDSN = "seckill:s3cret-m@tcp(db.internal:3306)/shop?parseTime=true"
	r, db := c.redisForLog(), c.dbForLog()
	if r != "redis://app@10.0.0.5:6380/2" || db != "mysql://seckill@tcp(db.internal:3306)/shop" {
		t.Fatalf("redis %q, db %q", r, db)
	}
	if strings.Contains(r+db, "s3cret") {
		t.Fatalf("a password leaks: %q %q", r, db)
	}
}
