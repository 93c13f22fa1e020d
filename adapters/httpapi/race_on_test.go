//go:build race

package httpapi_test

// raceAllocs is what the race detector adds to a claim's allocations through
// the handler: its instrumentation allocates too, and not the same count on
// every run (2 to 3 measured), so the budget leaves it a margin.
const raceAllocs = 4
