// Package memory holds in-memory, concurrency-safe fakes of every port for
// unit and component tests, behaving as the real adapters (test/contract runs both).
package memory

import (
	"context"
	"sync"
)

// mutex is a fake's one lock. lock takes it unless ctx is done, so a call
// on a cancelled context fails first and changes nothing, as a real
// adapter's round trip does; the caller unlocks.
type mutex struct{ sync.Mutex }

func (m *mutex) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.Lock()
	return nil
}

// locked runs f holding m, unless ctx is done.
func locked[T any](ctx context.Context, m *mutex, f func() (T, error)) (T, error) {
	if err := m.lock(ctx); err != nil {
		var zero T
		return zero, err
	}
	defer m.Unlock()
	return f()
}
