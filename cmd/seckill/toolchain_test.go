package main

import (
	"bytes"
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	goversion "go/version"
)

// goModToolchain reads the `toolchain` line of the module's go.mod: the Go
// release whose standard library the shipped binary must carry.
func goModToolchain(t *testing.T) (root, toolchain string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "toolchain "); ok {
			return root, strings.TrimSpace(v)
		}
	}
	t.Fatal("go.mod has no toolchain line")
	return "", ""
}

// A test binary built by an older Go than go.mod names tests a standard
// library the shipped binary must not carry (GOTOOLCHAIN=local ignores the
// toolchain line). `make test` pins the toolchain; by hand, GOTOOLCHAIN=auto.
func TestTestsRunOnTheToolchainGoModNames(t *testing.T) {
	_, want := goModToolchain(t)
	got, _, _ := strings.Cut(runtime.Version(), " ")
	if goversion.Compare(got, want) < 0 {
		t.Fatalf("built with %s, older than go.mod's toolchain %s: run with GOTOOLCHAIN=auto (or make test)", got, want)
	}
}

// TestMakeBuildCarriesTheToolchainGoModNames: on a machine whose go env says
// GOTOOLCHAIN=local, `make build` must still build with go.mod's toolchain,
// and `seckill version` must say so. The test runs make with the machine's
// own go (this test's switched toolchain is taken off PATH, where `go test`
// put it) and GOTOOLCHAIN=local, as an operator's shell would.
func TestMakeBuildCarriesTheToolchainGoModNames(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, want := goModToolchain(t)
	bin := filepath.Join(t.TempDir(), "seckill")
	cmd := exec.Command("make", "-C", root, "--no-print-directory", "build", "BIN="+bin)
	cmd.Env = append(machineEnv(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if info.GoVersion != want {
		t.Fatalf("make build under GOTOOLCHAIN=local built with %s, want go.mod's toolchain %s", info.GoVersion, want)
	}

	var out bytes.Buffer
	v := exec.Command(bin, "version")
	v.Stdout = &out
	if err := v.Run(); err != nil {
		t.Fatalf("seckill version: %v", err)
	}
	if !strings.Contains(out.String(), "go      "+want+" ") {
		t.Fatalf("seckill version says\n%s\nwant the Go line to name %s", out.String(), want)
	}
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		if c := strings.TrimSpace(string(head)); !strings.Contains(out.String(), "commit  "+c) {
			t.Fatalf("seckill version says\n%s\nwant the commit %s", out.String(), c)
		}
	}
}

// machineEnv is this process's environment without the toolchain `go test`
// switched to (on PATH, and as GOROOT), so that `go` is the machine's own.
func machineEnv() []string {
	switched := "golang.org" + string(filepath.Separator) + "toolchain@"
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if name == "PATH" {
			var keep []string
			for _, d := range filepath.SplitList(value) {
				if !strings.Contains(d, switched) {
					keep = append(keep, d)
				}
			}
			kv = "PATH=" + strings.Join(keep, string(filepath.ListSeparator))
		} else if strings.Contains(value, switched) {
			continue // GOROOT, GOTOOLDIR: the machine's go finds its own
		}
		env = append(env, kv)
	}
	return env
}

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"version"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "seckill ") || !strings.HasPrefix(lines[1], "commit  ") ||
		lines[2] != "go      "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("version printed\n%s", out.String())
	}
}
