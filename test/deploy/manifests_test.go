package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
)

const root = "../.."

func readFiles(t *testing.T) files {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	f := files{
		containerfile: read("Containerfile"),
		compose:       read("deploy/compose.yaml"),
		haproxy:       read("deploy/haproxy.cfg"),
		readme:        read("deploy/README.md"),
		makefile:      read("Makefile"),
		kube:          map[string]string{},
	}
	paths, err := filepath.Glob(filepath.Join(root, "deploy/kubernetes/*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Kubernetes manifests under deploy/kubernetes (%v)", err)
	}
	for _, p := range paths {
		rel, _ := filepath.Rel(root, p)
		f.kube[rel] = read(rel)
	}
	return f
}

// service is one in-process seckill on the embedded Redis and SQLite, wired
// as `seckill serve` wires it, whose router the probes are asked of.
var service struct {
	once    sync.Once
	handler http.Handler
	err     error
	close   func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if service.close != nil {
		service.close()
	}
	os.Exit(code)
}

func servedBy(t *testing.T) probe {
	t.Helper()
	service.once.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-deploy-test-")
		if err != nil {
			service.err = err
			return
		}
		c := infra.DefaultConfig()
		c.DataDir = dir
		c.HTTPAddr = "127.0.0.1:0"
		c.MetricsAddr = "off"
		app, cleanup, err := infra.Build(c, zerolog.Nop())
		if err != nil {
			service.err = err
			os.RemoveAll(dir)
			return
		}
		service.handler = app.Handler
		service.close = func() { cleanup(); os.RemoveAll(dir) }
	})
	if service.err != nil {
		t.Fatalf("build the service: %v", service.err)
	}
	return func(path string) error {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		service.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return fmt.Errorf("GET %s answers %d on a healthy instance, want 200", path, rec.Code)
		}
		return nil
	}
}

// TestDeploymentFilesKeepTheirPromises: the files as committed pass every check.
func TestDeploymentFilesKeepTheirPromises(t *testing.T) {
	if got := check(readFiles(t), servedBy(t)); len(got) > 0 {
		t.Fatalf("the deployment files break %d promises:\n  %s", len(got), strings.Join(got, "\n  "))
	}
}

// TestBrokenDeploymentFilesAreCaught: each bad copy changes one thing in one
// file and must be caught with a message that names it; a check that passes
// everything fails here.
func TestBrokenDeploymentFilesAreCaught(t *testing.T) {
	const (
		containerfile = "Containerfile"
		compose       = "deploy/compose.yaml"
		haproxy       = "deploy/haproxy.cfg"
		readme        = "deploy/README.md"
		kube          = "deploy/kubernetes/seckill.yaml"
	)
	tests := []struct {
		name      string
		file      string
		old, new  string
		wantError string
	}{
		{"misspelt_variable_in_compose", compose,
			"SECKILL_STREAM_MIN_IDLE: 30s", "SECKILL_STREAM_MINIDLE: 30s", "SECKILL_STREAM_MINIDLE is not a variable"},
		{"misspelt_variable_in_a_comment", kube,
			"# Below SECKILL_STREAM_MIN_IDLE", "# Below SECKILL_MIN_IDLE", "SECKILL_MIN_IDLE is not a variable"},
		{"two_instances_one_consumer", compose,
			"SECKILL_CONSUMER: seckill-3", "SECKILL_CONSUMER: seckill-2", `share SECKILL_CONSUMER "seckill-2"`},
		{"instance_without_consumer", compose,
			"      SECKILL_CONSUMER: seckill-3\n", "", "seckill-3: no SECKILL_CONSUMER"},
		{"shutdown_not_below_min_idle_in_compose", compose,
			"SECKILL_SHUTDOWN_TIMEOUT: 20s", "SECKILL_SHUTDOWN_TIMEOUT: 30s", "SECKILL_SHUTDOWN_TIMEOUT 30s is not below SECKILL_STREAM_MIN_IDLE 30s"},
		{"min_idle_below_shutdown_in_kubernetes", kube,
			"SECKILL_STREAM_MIN_IDLE: 30s", "SECKILL_STREAM_MIN_IDLE: 15s", "SECKILL_SHUTDOWN_TIMEOUT 20s is not below SECKILL_STREAM_MIN_IDLE 15s"},
		{"compose_grace_shorter_than_the_drain", compose,
			"stop_grace_period: 30s", "stop_grace_period: 15s", "grace period 15s is not longer"},
		{"kubernetes_grace_shorter_than_pause_and_drain", kube,
			"terminationGracePeriodSeconds: 35", "terminationGracePeriodSeconds: 25", "grace period 25s is not longer than the preStop pause 5s"},
		{"kubernetes_pause_eats_the_drain", kube,
			"sleep: {seconds: 5}", "sleep: {seconds: 15}", "grace period 35s is not longer than the preStop pause 15s"},
		{"image_runs_as_root", containerfile,
			"USER 65532:65532", "USER 0:0", `USER "0:0": want a numeric non-root UID`},
		{"image_user_by_name", containerfile,
			"USER 65532:65532", "USER seckill", `USER "seckill"`},
		{"image_on_a_base", containerfile,
			"FROM scratch", "FROM debian:12", `FROM "debian:12"`},
		{"image_listens_on_loopback", containerfile,
			"SECKILL_HTTP_ADDR=0.0.0.0:8080", "SECKILL_HTTP_ADDR=127.0.0.1:8080", "loopback"},
		{"image_listens_on_another_port", containerfile,
			"SECKILL_HTTP_ADDR=0.0.0.0:8080", "SECKILL_HTTP_ADDR=0.0.0.0:8081", "readinessProbe asks port http, but SECKILL_HTTP_ADDR listens on 8081"},
		{"misspelt_variable_in_the_readme", readme,
			"SECKILL_CONSUMER", "SECKILL_CONSUMERS", "SECKILL_CONSUMERS is not a variable"},
		{"pod_may_run_as_root", kube,
			"runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot is not true"},
		{"pod_runs_as_uid_0", kube,
			"runAsUser: 65532", "runAsUser: 0", "runAsUser 0"},
		{"writable_root_filesystem", kube,
			"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not true"},
		{"readiness_on_a_route_not_served", kube,
			"path: /readyz", "path: /ready", "readinessProbe /ready: GET /ready answers 404"},
		{"liveness_on_a_route_not_served", kube,
			"httpGet: {path: /healthz, port: http}\n            periodSeconds: 10", "httpGet: {path: /health, port: http}\n            periodSeconds: 10", "livenessProbe /health: GET /health answers 404"},
		{"probe_on_the_metrics_port", kube,
			"httpGet: {path: /readyz, port: http}", "httpGet: {path: /readyz, port: metrics}", "readinessProbe asks port metrics, but SECKILL_HTTP_ADDR listens on 8080"},
		{"no_readiness_probe", kube,
			"          readinessProbe:\n            httpGet: {path: /readyz, port: http}\n", "          readinessProbe:\n", "no readinessProbe"},
		{"consumer_as_a_literal", kube,
			"valueFrom:\n                fieldRef: {fieldPath: metadata.name}", "value: seckill", "SECKILL_CONSUMER must be the pod's name"},
		{"dsn_written_in_the_manifest", kube,
			"valueFrom:\n                secretKeyRef: {name: seckill-mysql, key: dsn}", "value: 'seckill:pw@tcp(mysql:3306)/seckill?parseTime=true'", "take it from a Secret"},
		{"deployment_instead_of_statefulset", kube,
			"kind: StatefulSet", "kind: Deployment", "run seckill as a StatefulSet"},
		{"no_disruption_budget", kube,
			"kind: PodDisruptionBudget", "kind: NetworkPolicy", "no PodDisruptionBudget selects its pods"},
		{"missing_config_map", kube,
			"configMapRef: {name: seckill}", "configMapRef: {name: seckill-env}", `ConfigMap "seckill-env"`},
		{"no_resource_requests", kube,
			"requests: {cpu: 500m, memory: 256Mi}", "requests: {}", "no resource requests"},
		{"bad_value_the_service_refuses", kube,
			"SECKILL_QUEUE: stream", "SECKILL_QUEUE: kafka", "the service would refuse to start"},
		{"image_not_the_one_make_builds", compose,
			"image: localhost/seckill:dev", "image: seckill:dev", "is not the one make image builds"},
		{"kubernetes_image_not_the_one_make_builds", kube,
			"image: localhost/seckill:dev", "image: seckill:dev", "is not the one make image builds"},
		{"trusted_proxies_a_whole_pod_network", kube,
			"SECKILL_TRUSTED_PROXIES: 10.244.0.10/32", "SECKILL_TRUSTED_PROXIES: 10.244.0.0/16", "more than 256 addresses"},
		{"trusted_proxies_miss_the_balancer", compose,
			"SECKILL_TRUSTED_PROXIES: 172.28.0.40/32", "SECKILL_TRUSTED_PROXIES: 172.28.0.41/32", "does not name the balancer balancer"},
		{"cluster_seed_not_in_the_file", compose,
			"SECKILL_REDIS_CLUSTER_ADDRS: 172.28.0.11:6379", "SECKILL_REDIS_CLUSTER_ADDRS: 172.28.0.17:6379", "names 172.28.0.17:6379, which is no Redis node"},
		{"dsn_names_no_database_of_the_file", compose,
			"@tcp(172.28.0.30:3306)", "@tcp(172.28.0.31:3306)", "names 172.28.0.31:3306, which is no database"},
		{"balancer_checks_a_route_not_served", haproxy,
			"option httpchk GET /readyz", "option httpchk GET /ready", "health check /ready: GET /ready answers 404"},
		{"balancer_misses_an_instance", haproxy,
			"    server seckill-3 172.28.0.23:8080\n", "", "but the instances listen on"},
		{"compose_does_not_parse", compose,
			"services:\n", "services: [\n", "does not parse"},
	}
	served := servedBy(t)
	good := readFiles(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := good
			f.kube = maps.Clone(good.kube)
			replace := func(text string) string {
				if !strings.Contains(text, tt.old) {
					t.Fatalf("%s no longer contains %q: update this bad copy", tt.file, tt.old)
				}
				return strings.Replace(text, tt.old, tt.new, 1)
			}
			if ptr, ok := map[string]*string{containerfile: &f.containerfile, compose: &f.compose,
				haproxy: &f.haproxy, readme: &f.readme}[tt.file]; ok {
				*ptr = replace(*ptr)
			} else {
				f.kube[tt.file] = replace(f.kube[tt.file])
			}
			got := check(f, served)
			for _, g := range got {
				if strings.Contains(g, tt.wantError) {
					return
				}
			}
			t.Fatalf("the bad copy passed, want a problem containing %q; got:\n  %s", tt.wantError, strings.Join(got, "\n  "))
		})
	}
}
