package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/infra"
)

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", `usage: seckill migrate up|status
       seckill migrate down [--force]

down rolls back the newest migration only, and refuses one that would drop rows (vouchers, orders)
unless --force is given.

flags:
`, stderr)
	force := fs.Bool("force", false, "migrate down: roll back even a migration that drops tables (or columns) holding rows, losing them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("migrate needs exactly one of up, down, status")
	}
	action := fs.Arg(0)
	// Flags may follow the action too: `migrate down --force`.
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("migrate needs exactly one of up, down, status, got %q too", fs.Args())
	}
	// Refuse a wrong action before touching (or creating) a database.
	if !slices.Contains([]string{"up", "down", "status"}, action) {
		fs.Usage()
		return fmt.Errorf("unknown migrate action %q", action)
	}
	if *force && action != "down" {
		return fmt.Errorf("--force applies to migrate down only")
	}
	cfg, log, err := loadCLI(stderr)
	if err != nil {
		return err
	}
	db, cleanup, err := infra.NewDB(cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	if action == "status" {
		st, err := mysqlstore.Status(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, st)
		return nil
	}
	names, none, done := []string(nil), "database is up to date", "applied:"
	if action == "up" {
		names, err = mysqlstore.Migrate(ctx, db)
	} else {
		none, done = "nothing to roll back", "rolled back:"
		names, err = mysqlstore.Rollback(ctx, db, *force)
		if lost := (*mysqlstore.DataLossError)(nil); errors.As(err, &lost) {
			return fmt.Errorf("%w; back up the database first, then run seckill migrate down --force to drop them", err)
		}
	}
	if err != nil {
		return err
	}
	if len(names) == 0 {
		fmt.Fprintln(stdout, none)
		return nil
	}
	fmt.Fprintln(stdout, done, strings.Join(names, ", "))
	return nil
}
