package infra

import "fmt"

// DevEndpointsAck is the value of SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS that
// lets the dev token endpoint run on a real Redis. It is a sentence, not
// "true", so that nobody sets it by copying a neighbouring line.
const DevEndpointsAck = "i-understand-anyone-can-log-in-as-anyone"

// devEndpointsRefused says why the dev token endpoint may not run here, or ""
// when it may. It mints a session for any user id, admins included, in the
// Redis the service reads sessions from. On the embedded Redis (inside this
// process, empty at every start) that harms nothing. On a real Redis, one
// node or a cluster, it hands out logins that the rest of hmdp trusts too,
// and a loopback listener is no protection: a reverse proxy on the same
// machine puts the internet on loopback. So a real Redis needs the operator
// to say, in a variable of its own, that they mean it.
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

// checkDevEndpointsAck refuses an acknowledgement with another value: a typo
// in it would otherwise read as "not acknowledged" only when the dev endpoint
// is on, and as nothing at all when it is off.
func (c Config) checkDevEndpointsAck(p *problems) {
	if c.DevEndpointsOnRealRedis != "" && c.DevEndpointsOnRealRedis != DevEndpointsAck {
		p.add("SECKILL_DEV_ENDPOINTS_ON_REAL_REDIS", "want %q (or unset), got %q", DevEndpointsAck, c.DevEndpointsOnRealRedis)
	}
}
