package infra_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/hmdp-go/seckill/infra"
)

// Not parallel: the GC percent and GOGC are process-wide.
func TestTuneGCRaisesTheTargetUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Run("unset: the service's default", func(t *testing.T) {
		t.Setenv("GOGC", "")                        // restored after the test...
		if err := os.Unsetenv("GOGC"); err != nil { // ...but unset during it
			t.Fatal(err)
		}
		debug.SetGCPercent(100)
		if got := infra.TuneGC(); got != infra.DefaultGCPercent {
			t.Fatalf("TuneGC without GOGC = %d, want %d", got, infra.DefaultGCPercent)
		}
		if now := debug.SetGCPercent(100); now != infra.DefaultGCPercent {
			t.Fatalf("GC percent after TuneGC = %d, want %d", now, infra.DefaultGCPercent)
		}
	})
	t.Run("GOGC chosen by the operator is kept", func(t *testing.T) {
		t.Setenv("GOGC", "150")
		debug.SetGCPercent(150) // what the runtime read from GOGC at start
		if got := infra.TuneGC(); got != 150 {
			t.Fatalf("TuneGC with GOGC=150 = %d, want 150", got)
		}
		if now := debug.SetGCPercent(150); now != 150 {
			t.Fatalf("GC percent after TuneGC = %d, want 150 kept", now)
		}
	})
}
