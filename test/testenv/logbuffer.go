package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a log sink that goroutines (a server's, a renewal loop's, a
// child process's copier) write while the test reads it. The buffer is a
// named field, not embedded: an embedded bytes.Buffer would promote
// ReadFrom, which io.Copy prefers to Write, and the copy would bypass the
// lock.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String reads the log while writers may still be writing it.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
