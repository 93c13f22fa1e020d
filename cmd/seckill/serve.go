package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/hmdp-go/seckill/infra"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noMigrate := fs.Bool("no-migrate", false, "do not apply pending migrations at start (same as SECKILL_MIGRATE=false)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := infra.LoadConfig()
	if err != nil {
		return err
	}
	if *noMigrate {
		cfg.Migrate = false
	}
	log := infra.NewLogger(cfg, stderr)
	app, cleanup, err := infra.Build(cfg, log)
	if err != nil {
		return fmt.Errorf("build service: %w", err)
	}
	defer cleanup()
	return app.Run(ctx)
}
