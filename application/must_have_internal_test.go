package application

import (
	"testing"

	"github.com/hmdp-go/seckill/ports"
)

// mustHavePanic is what mustHave panicked with ("" if it did not).
func mustHavePanic(useCase string, deps ...any) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = r.(string)
		}
	}()
	mustHave(useCase, deps...)
	return ""
}

func TestMustHaveNamesTheFirstMissingDependency(t *testing.T) {
	var typedNil *SoldOutMarks
	// A map's order is random from one range to the next: many tries would catch it.
	for range 100 {
		if got, want := mustHavePanic("X", "first", nil, "second", typedNil), "application: X needs a non-nil first"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if got, want := mustHavePanic("X", "clock", ports.SystemClock{}, "gate", nil), "application: X needs a non-nil gate"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := mustHavePanic("X", "clock", ports.SystemClock{}, "marks", &SoldOutMarks{}); got != "" {
		t.Fatalf("nothing is missing, got %q", got)
	}
}
