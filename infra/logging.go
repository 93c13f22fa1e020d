package infra

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

var durationsOnce sync.Once

// NewLogger builds the process logger from the config.
func NewLogger(c Config, w io.Writer) zerolog.Logger {
	// Durations read as "20s" and "1.83ms", not as bare numbers whose unit a
	// reader has to guess. zerolog keeps this in a global: set it once,
	// before the first logger exists.
	durationsOnce.Do(func() { zerolog.DurationFieldFormat = zerolog.DurationFormatString })
	lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel))
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if c.LogFormat == "console" {
		f, isFile := w.(*os.File)
		colour := isFile && isatty.IsTerminal(f.Fd())
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !colour}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// NewCLILogger is the logger of the operator commands (migrate, token,
// reconcile): human-readable lines on stderr, warnings and errors only
// unless SECKILL_LOG_LEVEL=debug, so a command's own output is not buried
// under JSON.
func NewCLILogger(c Config, w io.Writer) zerolog.Logger {
	c.LogFormat = "console"
	if lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel)); err != nil || lvl > zerolog.DebugLevel {
		c.LogLevel = "warn"
	}
	return NewLogger(c, w)
}

// go-redis logs pool and dial failures through a package-level logger of its
// own, as raw lines on stderr. They repeat what the error the caller gets
// says, so they go through zerolog at debug level instead.
var (
	redisLogOnce sync.Once
	redisLogTo   atomic.Pointer[zerolog.Logger]
)

type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l := redisLogTo.Load(); l != nil {
		l.Debug().Str("component", "go-redis").Msg(fmt.Sprintf(format, v...))
	}
}

// routeRedisLogs points go-redis's logger at log (the latest service's, the
// one process-wide setting allows).
func routeRedisLogs(log zerolog.Logger) {
	redisLogTo.Store(&log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}
