// Command seckill is the flash-sale service's one binary: serve, migrate, token and reconcile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
)

const usage = `usage: seckill <command> [flags]

commands:
  serve               run the HTTP service and the fulfilment workers
  migrate up|down [--force]|status
                      apply, roll back (the newest one; refuses to drop rows
                      without --force) or show database migrations
  token --user ID [--count N]
                      mint login tokens (users ID..ID+N-1), one per line
  reconcile --voucher ID [--fix]
                      compare Redis with MySQL for a voucher; --fix repairs Redis from MySQL
  version             print the version, the commit and the Go it was built with

Configuration comes from SECKILL_* environment variables (see README.md).
Without SECKILL_REDIS_URL / SECKILL_MYSQL_DSN the service runs on an embedded
Redis and SQLite. The design comparison is its own binary, seckill-bench, so
its load generators stay out of this one.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			os.Exit(0)
		case errors.Is(err, errUsage): // the usage text says it
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "seckill:", err)
		if errors.Is(err, errDifferences) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

var errUsage = errors.New("no command given")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stderr)
	case "migrate":
		return migrate(ctx, rest, stdout, stderr)
	case "token":
		return token(ctx, rest, stdout, stderr)
	case "reconcile":
		return reconcile(ctx, rest, stdout, stderr)
	case "version", "--version":
		printVersion(stdout)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// newFlags is a command's flag set; its help spells flags with two dashes, as README does.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.VisitAll(func(f *flag.Flag) { fmt.Fprintf(stderr, "  --%s\n    \t%s\n", f.Name, f.Usage) })
	}
	return fs
}

// parseFlags refuses any argument that is not a flag (`token --user 1 5`), else dropped in silence.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// loadCLI reads the configuration for a command other than serve.
func loadCLI(stderr io.Writer) (infra.Config, zerolog.Logger, error) {
	cfg, err := infra.LoadConfig()
	if err != nil {
		return cfg, zerolog.Nop(), err
	}
	log := infra.NewCLILogger(cfg, stderr)
	infra.WarnUnknownVariables(log, os.Environ())
	return cfg, log, nil
}
