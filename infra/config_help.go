package infra

// variableHelp says in one line what each SECKILL_* variable does, for
// `seckill serve --help`; docs/CONFIGURATION.md says it at length.
// TestEveryVariableHasHelp holds every variable to a line.
var variableHelp = map[string]string{
	"SECKILL_ADMIN_USERS":                 "comma-separated user ids whose token may create vouchers and use admin endpoints (make run: 1)",
	"SECKILL_BATCH_SIZE":                  "most orders per MySQL transaction (one writer makes the biggest batches)",
	"SECKILL_CONSUMER":                    "this instance's consumer name in the group (stable, unique per instance)",
	"SECKILL_DATA_DIR":                    "where the embedded SQLite lives",
	"SECKILL_DEV_ENDPOINTS":               "mount POST /dev/tokens (make run sets it)",
	"SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS": "i-understand-anyone-can-log-in-as-anyone: the dev endpoint on a real Redis",
	"SECKILL_HTTP_ADDR":                   "listen address",
	"SECKILL_HTTP_MAX_CONNS":              "most open API connections",
	"SECKILL_JWT_ADMIN_ROLE":              "a role in the provider's roles claim that makes its holder an admin (beside SECKILL_ADMIN_USERS)",
	"SECKILL_JWT_ALGS":                    "the signature algorithms accepted: asymmetric only (RS*, PS*, ES*, EdDSA)",
	"SECKILL_JWT_AUDIENCE":                "the tokens' aud, checked when set: this service at the provider (unset, the start warns)",
	"SECKILL_JWT_ISSUER":                  "the tokens' iss, checked when set: the provider (unset, the start warns)",
	"SECKILL_JWT_JWKS_URL":                "the shop's identity provider's JWKS: Authorization: Bearer <JWT> is accepted beside hmdp's tokens",
	"SECKILL_JWT_KEY_FILE":                "instead of a JWKS URL, a PEM file of the provider's public keys",
	"SECKILL_JWT_ROLES_CLAIM":             "the claim holding the roles (a list of strings, or one)",
	"SECKILL_JWT_USER_CLAIM":              "the claim holding the numeric user id",
	"SECKILL_KEY_PREFIX":                  "prefix of the gate's Redis keys",
	"SECKILL_LOG_FORMAT":                  "json or console",
	"SECKILL_LOG_LEVEL":                   "zerolog level (one line per HTTP request at debug)",
	"SECKILL_METRICS_ADDR":                "where /metrics is served, apart from the API",
	"SECKILL_MYSQL_DSN":                   "user:pass@tcp(host:port)/db?parseTime=true (times are kept in UTC)",
	"SECKILL_PAYMENT_SECRET":              "the key of the HMAC-SHA256 in X-Seckill-Signature of POST /payments/notify (at least 16 bytes)",
	"SECKILL_PAY_WINDOW":                  "an order must be paid within this time of its claim, or it expires and its unit returns (0 = never)",
	"SECKILL_QUEUE":                       "queue driver: stream or channel",
	"SECKILL_RATE_IP":                     "the same per client IP, higher because users share IPs behind NAT (0 = no limit)",
	"SECKILL_RATE_USER":                   "claims + order-status requests one user may make per 2 s window (0 = no limit)",
	"SECKILL_RECLAIM_AFTER_CANCEL":        "true lets the buyer of a cancelled or expired order claim the voucher again (a new order)",
	"SECKILL_REDIS_CLUSTER_ADDRS":         "a Redis Cluster's seed nodes, host:port,host:port,... (exclusive with SECKILL_REDIS_URL)",
	"SECKILL_REDIS_URL":                   "one Redis node: redis://host:port/db",
	"SECKILL_REDIS_WAIT_REPLICAS":         "replicas of its master that must hold a claim before it answers success (Redis WAIT); 0 = off",
	"SECKILL_REDIS_WAIT_TIMEOUT":          "how long a claim waits for those replicas; unconfirmed → 503 outcome_unknown",
	"SECKILL_ROOM_SECRET":                 "the key of the HMAC that signs waiting-room tickets and passes (at least 32 bytes)",
	"SECKILL_SHUTDOWN_TIMEOUT":            "graceful shutdown deadline (stream mode: below SECKILL_STREAM_MIN_IDLE)",
	"SECKILL_STREAM_MIN_IDLE":             "how long a dead consumer's entry waits before another instance claims it",
	"SECKILL_TIMEZONE":                    "zone of the original API's zone-less times",
	"SECKILL_TRUSTED_PROXIES":             "CIDRs (or addresses) of reverse proxies whose X-Forwarded-For / X-Real-IP name the client",
}

// HelpLines is how many variables have a help line.
func HelpLines() int { return len(variableHelp) }
