// Package application holds the use cases of the flash sale. Each use case
// depends only on domain and ports, so it runs the same against the Redis and
// MySQL adapters as against the in-memory fakes.
package application

import (
	"fmt"
	"reflect"
)

// mustHave panics when a use case is built with a missing dependency, typed
// nil included, so wiring mistakes fail at start.
func mustHave(useCase string, deps map[string]any) {
	for name, d := range deps {
		if isNil(d) {
			panic(fmt.Sprintf("application: %s needs a non-nil %s", useCase, name))
		}
	}
}

func isNil(d any) bool {
	if d == nil {
		return true
	}
	switch v := reflect.ValueOf(d); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}
