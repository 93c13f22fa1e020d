// Package arch checks the dependency rule of the hexagon: domain <- ports <-
// application <- adapters <- infra/cmd, with no infrastructure library in the
// inner layers.
package arch_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hmdp-go/seckill"

type pkg struct {
	ImportPath string
	Deps       []string
	Standard   bool
}

// deps lists every package the named packages depend on, transitively.
func deps(t *testing.T, pattern string) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps,Standard", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestInnerLayersImportNoInfrastructure(t *testing.T) {
	tests := []struct {
		pattern string
		// allowed project packages; anything else of the module is a violation
		allowed []string
		// stdOnly: nothing outside the standard library and allowed
		stdOnly bool
	}{
		{pattern: module + "/domain", stdOnly: true},
		{pattern: module + "/ports", allowed: []string{"/domain"}, stdOnly: true},
		{pattern: module + "/application", allowed: []string{"/domain", "/ports"}, stdOnly: true},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.pattern, module+"/"), func(t *testing.T) {
			for _, p := range deps(t, tt.pattern) {
				for _, d := range p.Deps {
					switch {
					case isStd(d):
					case strings.HasPrefix(d, module+"/"):
						ok := false
						for _, a := range tt.allowed {
							ok = ok || d == module+a
						}
						if !ok {
							t.Errorf("%s depends on %s: the arrows point inwards only", p.ImportPath, d)
						}
					case tt.stdOnly:
						t.Errorf("%s depends on %s: inner layers use the standard library only", p.ImportPath, d)
					}
				}
			}
		})
	}
}

// drivingAdapters run the use cases; reachesApplication lists every adapter
// that may import application: the driving ones, and metrics (it reads the
// waiting rooms' figures). Every other adapter is driven, through a port.
var (
	drivingAdapters    = []string{"/adapters/httpapi", "/adapters/worker"}
	reachesApplication = append([]string{"/adapters/metrics"}, drivingAdapters...)
)

// TestAdaptersImportOnlyWhatTheirRoomAllows: an adapter implements ports;
// only the allowed ones import application, and none imports a driving
// adapter (an interface it needs from one is declared where it is used).
func TestAdaptersImportOnlyWhatTheirRoomAllows(t *testing.T) {
	for _, p := range deps(t, module+"/adapters/...") {
		for _, d := range p.Deps {
			if d == module+"/application" && !within(p.ImportPath, reachesApplication) {
				t.Errorf("%s depends on application: only %v drive the use cases", p.ImportPath, reachesApplication)
			}
			if within(d, drivingAdapters) && !within(p.ImportPath, drivingAdapters) {
				t.Errorf("%s depends on %s, a driving adapter", p.ImportPath, d)
			}
		}
	}
}

func within(path string, pkgs []string) bool {
	for _, a := range pkgs {
		if path == module+a || strings.HasPrefix(path, module+a+"/") {
			return true
		}
	}
	return false
}

func TestAdaptersDoNotReachTheCompositionRoot(t *testing.T) {
	for _, p := range deps(t, module+"/adapters/...") {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module+"/infra") || strings.HasPrefix(d, module+"/cmd") {
				t.Errorf("%s depends on %s: only infra and cmd compose adapters", p.ImportPath, d)
			}
		}
	}
}

// The service binary links no load generator or bench-only library: they
// live in cmd/seckill-bench, so a production image carries none of them.
func TestServiceBinaryLinksNoBenchTooling(t *testing.T) {
	benchOnly := []string{
		"github.com/tsenart/vegeta",
		"github.com/HdrHistogram/hdrhistogram-go",
		"github.com/schollz/progressbar",
		module + "/cmd/seckill-bench",
	}
	for _, p := range deps(t, module+"/cmd/seckill") {
		for _, d := range p.Deps {
			for _, b := range benchOnly {
				if strings.HasPrefix(d, b) {
					t.Errorf("%s depends on %s: bench tooling belongs to cmd/seckill-bench", p.ImportPath, d)
				}
			}
		}
	}
}
