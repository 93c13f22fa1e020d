// Package application holds the use cases of the flash sale. Each depends only
// on domain and ports, so it runs the same against the adapters as against the fakes.
package application

import (
	"fmt"
	"reflect"
)

// mustHave panics when a use case is built with a missing dependency, typed
// nil included, so wiring mistakes fail at start. deps alternate each
// dependency's name and value; the first missing one in that order is named.
func mustHave(useCase string, deps ...any) {
	for i := 0; i+1 < len(deps); i += 2 {
		if v := reflect.ValueOf(deps[i+1]); !v.IsValid() || nilable[v.Kind()] && v.IsNil() {
			panic(fmt.Sprintf("application: %s needs a non-nil %v", useCase, deps[i]))
		}
	}
}

var nilable = map[reflect.Kind]bool{
	reflect.Pointer: true, reflect.Interface: true, reflect.Map: true, reflect.Slice: true, reflect.Func: true, reflect.Chan: true,
}
