package main

import (
	"bytes"
	"strings"
	"testing"
)

// --help printed the usage and exited 2, as if it had been a mistake.
func TestHelpExitsZero(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), []string{"--help"}, &out, &errOut)
	if code := exitCode(err); code != 0 {
		t.Fatalf("--help exits %d (err %v), want 0", code, err)
	}
	if !strings.Contains(errOut.String(), "--scenario") && !strings.Contains(errOut.String(), "-scenario") {
		t.Fatalf("--help printed no flags:\n%s", errOut.String())
	}
	if code := exitCode(runBench(t.Context(), []string{"--no-such-flag"}, &out, &errOut)); code != 2 {
		t.Fatalf("a bad flag exits %d, want 2", code)
	}
}
