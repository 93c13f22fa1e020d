// Package application holds the use cases of the flash sale. Each depends only
// on domain and ports, so it runs the same against the adapters as against the fakes.
package application

import (
	"fmt"
	"reflect"
)

// mustHave panics when a use case is built with a missing dependency, typed
// nil included, so wiring mistakes fail at start.
func mustHave(useCase string, deps map[string]any) {
	for name, d := range deps {
		if v := reflect.ValueOf(d); !v.IsValid() || nilable[v.Kind()] && v.IsNil() {
			panic(fmt.Sprintf("application: %s needs a non-nil %s", useCase, name))
		}
	}
}

var nilable = map[reflect.Kind]bool{
	reflect.Pointer: true, reflect.Interface: true, reflect.Map: true, reflect.Slice: true, reflect.Func: true, reflect.Chan: true,
}
