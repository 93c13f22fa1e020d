package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hmdp-go/seckill/infra"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	usage := `usage: seckill serve [--no-migrate]

Runs the HTTP service and the fulfilment workers until SIGINT or SIGTERM, then
drains the queue within SECKILL_SHUTDOWN_TIMEOUT. Everything else is set by
environment variables (README.md, "Configuration", says what each does):

`
	for _, v := range infra.ConfigVariables() {
		usage += fmt.Sprintf("  %s (default %q)\n      %s\n", v.Name, v.Default, v.Help)
	}
	fs := newFlags("serve", usage+"  (SECKILL_CONSUMER empty: seckill-<host name>)\n\nflags:\n", stderr)
	noMigrate := fs.Bool("no-migrate", false, "do not apply pending migrations at start")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := infra.LoadConfig()
	if err != nil {
		return err
	}
	if *noMigrate {
		cfg.Migrate = false
	}
	startProfiler(stderr)
	log := infra.NewLogger(cfg, stderr)
	infra.WarnUnknownVariables(log, os.Environ())
	log.Info().Int("gc_percent", infra.TuneGC()).Msg("garbage collector target (GOGC; default 400 here)")
	// Before the build: the API's connection cap is derived from it.
	if files, err := infra.RaiseFileLimit(); err != nil {
		log.Warn().Err(err).Uint64("file_limit", files).Msg("could not raise the open-file limit to its hard limit")
	}
	app, cleanup, err := infra.Build(cfg, log)
	if err != nil {
		return fmt.Errorf("build service: %w", err)
	}
	err = app.Run(ctx)
	stopping := time.Now()
	cleanup()
	ev := log.Info()
	if err != nil {
		ev = log.Error().Err(err)
	}
	ev.Str("cleanup", time.Since(stopping).String()).Msg("stopped")
	return err
}
