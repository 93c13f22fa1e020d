package infra

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector's target that `seckill serve`
// (and the bench's in-process service) runs with unless GOGC says otherwise.
//
// The service's live heap is small (the token cache, the queue, the
// connection pools: tens of MB) and a claim allocates a few KB that die with
// its request, so at Go's default of 100 a stampede starts a collection every
// few milliseconds and the collector took ~8% of the service's CPU in the wrk
// profiles (docs/BENCHMARKS.md). At 400 the heap may grow to five times the
// live data between collections, a few hundred MB at most, for about a
// quarter of the collections. GOMEMLIMIT, if set, still caps the heap.
const DefaultGCPercent = 400

// TuneGC sets the collector's target to DefaultGCPercent when the operator
// did not choose one with GOGC, and returns the target in force (GOGC=off
// reads as -1).
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}
