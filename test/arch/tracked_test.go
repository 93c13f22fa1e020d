package arch_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes: the largest file the repository may carry. The largest
// legitimate ones (the live page's screenshot, the vendored chart library,
// the benchmark report) are well under it; a build output is tens of MB.
const maxTrackedBytes = 4 << 20

// executableMagic are the first bytes of the binaries `go build` writes on
// the platforms Go targets: ELF, Mach-O (32/64-bit, both byte orders, fat),
// PE (MZ) and a `#!`-less Wasm module.
var executableMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf},
	{0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	{'M', 'Z'},
	{0x00, 'a', 's', 'm'},
}

// TestNoBinaryOrHugeFileIsTracked: a stale build output once sat at the root
// (39 MB, `go build ./cmd/seckill` overwrote it, and its old defaults looked
// like the service's). Compiled programs are built, never committed.
func TestNoBinaryOrHugeFileIsTracked(t *testing.T) {
	root, files := trackedFiles(t)
	for _, name := range files {
		path := filepath.Join(root, name)
		info, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and %d bytes (limit %d): build outputs and data belong outside git", name, info.Size(), maxTrackedBytes)
		}
		if kind := executableKind(t, path); kind != "" {
			t.Errorf("%s is a tracked %s binary: git rm --cached it and let .gitignore keep build outputs out", name, kind)
		}
	}
}

// trackedFiles lists the files git tracks, from the repository root. Outside
// a git checkout (a source tarball, a module cache) there is nothing to check.
func trackedFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	root = strings.TrimSpace(string(out))
	out, err = exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatal("git ls-files lists nothing")
	}
	return root, files
}

// executableKind names the binary format of the file, or "" for anything else.
func executableKind(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := f.Read(head)
	head = head[:n]
	for _, m := range executableMagic {
		if bytes.HasPrefix(head, m) {
			switch m[0] {
			case 0x7f:
				return "ELF"
			case 'M':
				return "PE"
			case 0x00:
				return "Wasm"
			default:
				return "Mach-O"
			}
		}
	}
	return ""
}
