package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/infra"
)

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: seckill migrate up|down|status") }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("migrate needs exactly one of up, down, status")
	}
	// Refuse a wrong action before touching (or creating) a database.
	switch fs.Arg(0) {
	case "up", "down", "status":
	default:
		fs.Usage()
		return fmt.Errorf("unknown migrate action %q", fs.Arg(0))
	}
	cfg, err := infra.LoadConfig()
	if err != nil {
		return err
	}
	log := infra.NewCLILogger(cfg, stderr)
	infra.WarnUnknownVariables(log, os.Environ())
	db, cleanup, err := infra.NewDB(cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()

	switch fs.Arg(0) {
	case "up":
		applied, err := mysqlstore.Migrate(ctx, db)
		if err != nil {
			return err
		}
		if len(applied) == 0 {
			fmt.Fprintln(stdout, "database is up to date")
			return nil
		}
		fmt.Fprintln(stdout, "applied:", strings.Join(applied, ", "))
	case "down":
		rolled, err := mysqlstore.Rollback(ctx, db)
		if err != nil {
			return err
		}
		if len(rolled) == 0 {
			fmt.Fprintln(stdout, "nothing to roll back")
			return nil
		}
		fmt.Fprintln(stdout, "rolled back:", strings.Join(rolled, ", "))
	case "status":
		st, err := mysqlstore.Status(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, st)
	}
	return nil
}
