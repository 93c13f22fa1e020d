package infra

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
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
	// Durations as "20s", not bare numbers; a zerolog global, set once.
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

// NewCLILogger is the operator commands' logger: console lines, warnings and
// errors only unless SECKILL_LOG_LEVEL=debug.
func NewCLILogger(c Config, w io.Writer) zerolog.Logger {
	c.LogFormat = "console"
	if lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel)); err != nil || lvl > zerolog.DebugLevel {
		c.LogLevel = "warn"
	}
	return NewLogger(c, w)
}

// go-redis prints pool and dial failures to stderr; they repeat the caller's
// error, so they go to zerolog at debug level.
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

// routeRedisLogs points go-redis's process-wide logger at log.
func routeRedisLogs(log zerolog.Logger) {
	redisLogTo.Store(&log)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

// DefaultGCPercent is the service's GOGC unless set. The live heap is tens of
// MB and a claim's garbage dies with it: at 100 the collector took ~8% of the
// CPU (docs/BENCHMARKS.md); 400 costs a few hundred MB for a quarter of the
// collections.
const DefaultGCPercent = 400

// TuneGC applies DefaultGCPercent unless GOGC is set, and returns the target
// in force (off: -1).
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}
