// Package deploy_test checks the deployment files (Containerfile,
// deploy/compose.yaml, deploy/haproxy.cfg, deploy/kubernetes/*.yaml) against
// the service they deploy: the variables they set are ones infra.Config reads
// and accepts together, each instance has a consumer name of its own, a drain
// ends before the kill, the image runs as non-root, and probes ask routes the
// router serves. No container engine or cluster is needed: the files are
// parsed, the probes asked of an in-process service.
package deploy_test

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hmdp-go/seckill/infra"
)

// files are the deployment files as text; a bad copy replaces one of them.
type files struct {
	containerfile, compose, haproxy string
	readme                          string            // deploy/README.md: its variables are copied into deployments
	kube                            map[string]string // path -> text
	makefile                        string            // names the image `make image` builds
}

// probe asks the service for a path and says why it would fail a probe.
type probe func(path string) error

// check returns every broken promise of the files, one line each.
func check(f files, served probe) []string {
	var p problems
	img := checkContainerfile(f.containerfile, &p)
	img.name = builtImage(f.makefile, &p)
	p.unknownVars("Containerfile", f.containerfile)
	p.unknownVars("deploy/compose.yaml", f.compose)
	p.unknownVars("deploy/README.md", f.readme)
	checkCompose(f.compose, f.haproxy, img, served, &p)
	for path, text := range f.kube {
		p.unknownVars(path, text)
		checkKubernetes(path, text, img, served, &p)
	}
	return p.list
}

type problems struct{ list []string }

func (p *problems) add(where, format string, args ...any) {
	p.list = append(p.list, where+": "+fmt.Sprintf(format, args...))
}

// known is every variable infra.Config (and its nested structs) reads.
var known = func() map[string]bool {
	m := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" && name != "-" {
				m[name] = true
			}
			if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeOf(infra.Config{}))
	return m
}()

var seckillVar = regexp.MustCompile(`\bSECKILL_[A-Z0-9_]*[A-Z0-9]\b`)

// unknownVars: every SECKILL_* word in the file, comments included, is a
// variable the service reads: a misspelt one would be ignored at start and
// leave its default in force.
func (p *problems) unknownVars(where, text string) {
	seen := map[string]bool{}
	for _, v := range seckillVar.FindAllString(text, -1) {
		if !known[v] && !seen[v] {
			seen[v] = true
			p.add(where, "%s is not a variable infra.Config reads", v)
		}
	}
}

// imageConfig is what the Containerfile sets for every container.
type imageConfig struct {
	env  map[string]string
	user string
	// name is the image `make image` builds, which the examples must run
	// as written: buildah tags seckill:dev as localhost/seckill:dev, so an
	// example naming seckill:dev runs with podman and not with Docker.
	name string
}

// builtImage is the Makefile's IMAGE.
func builtImage(makefile string, p *problems) string {
	m := regexp.MustCompile(`(?m)^IMAGE\s*\?=\s*(\S+)`).FindStringSubmatch(makefile)
	if m == nil {
		p.add("Makefile", "no IMAGE ?= line: the examples cannot be checked against the image it builds")
		return ""
	}
	return m[1]
}

// maxTrustedAddrs bounds a trusted proxy range: the proxies are a few
// machines; a range as wide as a pod network trusts every pod in it to say
// who the client is (docs/SECURITY.md).
const maxTrustedAddrs = 256

// checkTrustedProxies: every range is a few proxies' addresses.
func checkTrustedProxies(where, value string, p *problems) {
	for _, s := range strings.Split(value, ",") {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			continue // the service's own validation says so
		}
		if host := pfx.Addr().BitLen() - pfx.Bits(); host > 8 {
			p.add(where, "SECKILL_TRUSTED_PROXIES trusts %s, more than %d addresses: name the proxies themselves, never a range clients or other pods connect from",
				pfx, maxTrustedAddrs)
		}
	}
}

func checkContainerfile(text string, p *problems) imageConfig {
	const where = "Containerfile"
	img := imageConfig{env: map[string]string{}}
	var entrypoint, from string
	// Join continued lines, drop comments.
	var lines []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cur+t)
		cur = ""
	}
	for _, l := range lines {
		instr, args, _ := strings.Cut(l, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			from = args
		case "ENV":
			for _, kv := range strings.Fields(args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					p.add(where, "ENV %q: want KEY=value", kv)
					continue
				}
				img.env[k] = v
			}
		case "USER":
			img.user = args
		case "ENTRYPOINT":
			entrypoint = args
		}
	}
	if from != "scratch" {
		p.add(where, "FROM %q, want scratch (nothing in the image but the binary)", from)
	}
	uid, _, _ := strings.Cut(img.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		p.add(where, "USER %q: want a numeric non-root UID (runAsNonRoot cannot verify a name)", img.user)
	}
	if entrypoint != `["/seckill"]` {
		p.add(where, `ENTRYPOINT %s, want ["/seckill"]`, entrypoint)
	}
	return img
}

// instance is one seckill container's effective settings.
type instance struct {
	where string
	env   map[string]string // image ENV, then the instance's own
	grace time.Duration     // from SIGTERM to SIGKILL
	pause time.Duration     // of it, spent before the service hears SIGTERM
}

// checkInstance: the settings load as the service would load them, and the
// shutdown fits both the takeover delay and the grace period.
func checkInstance(in instance, p *problems) infra.Config {
	c, err := infra.LoadConfigFrom(in.env)
	if err != nil {
		p.add(in.where, "the service would refuse to start: %v", err)
		c = infra.DefaultConfig()
	}
	shutdown, minIdle := durationOf(in.env, "SECKILL_SHUTDOWN_TIMEOUT"), durationOf(in.env, "SECKILL_STREAM_MIN_IDLE")
	if shutdown >= minIdle {
		p.add(in.where, "SECKILL_SHUTDOWN_TIMEOUT %s is not below SECKILL_STREAM_MIN_IDLE %s", shutdown, minIdle)
	}
	if in.grace <= in.pause+shutdown {
		p.add(in.where, "grace period %s is not longer than the preStop pause %s + SECKILL_SHUTDOWN_TIMEOUT %s: "+
			"the drain would be killed", in.grace, in.pause, shutdown)
	}
	checkTrustedProxies(in.where, in.env["SECKILL_TRUSTED_PROXIES"], p)
	if host, _, _ := net.SplitHostPort(c.HTTPAddr); host == "localhost" || net.ParseIP(host).IsLoopback() {
		p.add(in.where, "SECKILL_HTTP_ADDR %s is loopback: nothing outside the container reaches it", c.HTTPAddr)
	}
	return c
}

// durationOf reads a duration variable, or its default when unset.
func durationOf(env map[string]string, name string) time.Duration {
	if v, ok := env[name]; ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	d := infra.DefaultConfig()
	switch name {
	case "SECKILL_SHUTDOWN_TIMEOUT":
		return d.ShutdownTimeout
	case "SECKILL_STREAM_MIN_IDLE":
		return d.StreamMinIdle
	}
	panic("durationOf: " + name)
}

// distinctConsumers: two live instances under one name are refused (the
// name is leased), and would otherwise re-read each other's orders.
func distinctConsumers(where string, consumers map[string]string, p *problems) {
	byName := map[string][]string{}
	for inst, name := range consumers {
		byName[name] = append(byName[name], inst)
	}
	for name, insts := range byName {
		if len(insts) > 1 {
			slices.Sort(insts)
			p.add(where, "instances %s share SECKILL_CONSUMER %q", strings.Join(insts, ", "), name)
		}
	}
}

// httpPort is the port the instance's SECKILL_HTTP_ADDR listens on.
func httpPort(c infra.Config) int {
	_, port, _ := net.SplitHostPort(c.HTTPAddr)
	n, _ := strconv.Atoi(port)
	return n
}
