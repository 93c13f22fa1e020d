package deploy_test

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v4"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	User            string            `yaml:"user"`
	Command         any               `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Networks        map[string]struct {
		IPv4 string `yaml:"ipv4_address"`
	} `yaml:"networks"`
}

func (s composeService) ip() string {
	for _, n := range s.Networks {
		if n.IPv4 != "" {
			return n.IPv4
		}
	}
	return ""
}

// imageIs: the image's repository name is one of names (any registry, any tag).
func (s composeService) imageIs(names ...string) bool {
	repo, _, _ := strings.Cut(s.Image[strings.LastIndex(s.Image, "/")+1:], ":")
	return slices.Contains(names, repo)
}

// interpolation is compose's ${VAR:-default}; the check reads the default.
var interpolation = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}`)

func checkCompose(text, haproxy string, img imageConfig, served probe, p *problems) {
	const where = "deploy/compose.yaml"
	var f composeFile
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		p.add(where, "does not parse: %v", err)
		return
	}
	byIP := map[string]string{} // address -> service
	for name, s := range f.Services {
		if ip := s.ip(); ip != "" {
			byIP[ip] = name
		}
	}
	consumers := map[string]string{}
	var backends []string // the instances' HTTP addresses
	for _, name := range sortedKeys(f.Services) {
		s := f.Services[name]
		if !s.imageIs("seckill") {
			continue
		}
		at := where + " " + name
		if img.name != "" && s.Image != img.name {
			p.add(at, "image %q is not the one make image builds (%q)", s.Image, img.name)
		}
		env := map[string]string{}
		for k, v := range img.env {
			env[k] = v
		}
		for k, v := range s.Environment {
			env[k] = interpolation.ReplaceAllString(v, "$1")
		}
		grace := 10 * time.Second // compose's default
		if s.StopGracePeriod != "" {
			d, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil {
				p.add(at, "stop_grace_period %q: %v", s.StopGracePeriod, err)
			}
			grace = d
		}
		c := checkInstance(instance{where: at, env: env, grace: grace}, p)
		if s.User != "" {
			if uid, _, _ := strings.Cut(s.User, ":"); uid == "0" || uid == "root" {
				p.add(at, "user %q: the instances run as the image's non-root user", s.User)
			}
		}
		if v, ok := s.Environment["SECKILL_CONSUMER"]; !ok {
			p.add(at, "no SECKILL_CONSUMER: instances in containers need a name of their own, stable across restarts")
		} else {
			consumers[name] = v
		}
		for _, seed := range c.RedisClusterAddrs {
			host, port, _ := net.SplitHostPort(seed)
			if s := f.Services[byIP[host]]; !s.imageIs("redis") || port != "6379" {
				p.add(at, "SECKILL_REDIS_CLUSTER_ADDRS names %s, which is no Redis node of this file", seed)
			}
		}
		if c.RedisURL != "" || len(c.RedisClusterAddrs) == 0 {
			p.add(at, "want SECKILL_REDIS_CLUSTER_ADDRS (and no SECKILL_REDIS_URL): the example runs on the cluster")
		}
		if dsn, err := mysql.ParseDSN(c.MySQLDSN); err != nil || c.MySQLDSN == "" {
			p.add(at, "SECKILL_MYSQL_DSN %q names no database", c.MySQLDSN)
		} else if host, _, _ := net.SplitHostPort(dsn.Addr); !f.Services[byIP[host]].imageIs("mariadb", "mysql") {
			p.add(at, "SECKILL_MYSQL_DSN names %s, which is no database of this file", dsn.Addr)
		}
		for _, bname := range sortedKeys(f.Services) {
			b := f.Services[bname]
			if !b.imageIs("haproxy", "nginx") {
				continue
			}
			addr, err := netip.ParseAddr(b.ip())
			if err != nil || !slices.ContainsFunc(c.Proxies(), func(pr netip.Prefix) bool { return pr.Contains(addr) }) {
				p.add(at, "SECKILL_TRUSTED_PROXIES %q does not name the balancer %s (%s): "+
					"every user would share its per-IP budget", c.TrustedProxies, bname, b.ip())
			}
		}
		backends = append(backends, fmt.Sprintf("%s:%d", s.ip(), httpPort(c)))
	}
	if len(consumers) < 2 {
		p.add(where, "%d seckill instances, want several", len(consumers))
	}
	distinctConsumers(where, consumers, p)
	checkHAProxy(haproxy, backends, served, p)
}

var (
	haproxyCheck  = regexp.MustCompile(`(?m)^\s*option\s+httpchk\s+(?:GET\s+)?(\S+)`)
	haproxyServer = regexp.MustCompile(`(?m)^\s*server\s+\S+\s+(\S+)`)
)

// checkHAProxy: the balancer's health check asks a served route, and its
// servers are exactly the compose file's instances.
func checkHAProxy(text string, backends []string, served probe, p *problems) {
	const where = "deploy/haproxy.cfg"
	m := haproxyCheck.FindStringSubmatch(text)
	if m == nil {
		p.add(where, "no `option httpchk`: a dead instance would keep its share of the traffic")
	} else if err := served(m[1]); err != nil {
		p.add(where, "health check %s: %v", m[1], err)
	}
	var servers []string
	for _, m := range haproxyServer.FindAllStringSubmatch(text, -1) {
		servers = append(servers, m[1])
	}
	slices.Sort(servers)
	slices.Sort(backends)
	if !slices.Equal(servers, backends) {
		p.add(where, "servers %v, but the instances listen on %v", servers, backends)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
