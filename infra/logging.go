package infra

import (
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger builds the process logger from the config.
func NewLogger(c Config, w io.Writer) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(strings.ToLower(c.LogLevel))
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if c.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
