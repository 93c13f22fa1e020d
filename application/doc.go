// Package application holds the use cases of the flash sale. Each use case
// depends only on domain and ports, so it runs the same against the Redis and
// MySQL adapters as against the in-memory fakes.
package application

import "fmt"

// mustHave panics at start when a use case is built with a missing dependency,
// so wiring mistakes fail before the first request.
func mustHave(useCase string, deps map[string]any) {
	for name, d := range deps {
		if d == nil {
			panic(fmt.Sprintf("application: %s needs a non-nil %s", useCase, name))
		}
	}
}
