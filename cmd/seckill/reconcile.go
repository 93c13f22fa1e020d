package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// errDifferences: the gate and the database disagree and --fix was not given.
var errDifferences = errors.New("Redis and MySQL disagree (run with --fix, while no claims are running, to repair Redis from MySQL)")

func reconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	voucher := fs.Int64("voucher", 0, "seckill voucher id to reconcile (required)")
	fix := fs.Bool("fix", false, "repair Redis from MySQL (the source of truth); run only while no claims are served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *voucher <= 0 {
		return errors.New("reconcile: --voucher must be a positive voucher id")
	}
	cfg, err := infra.LoadConfig()
	if err != nil {
		return err
	}
	if !cfg.RealRedis() || cfg.MySQLDSN == "" {
		return errors.New("reconcile: set SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS) and SECKILL_MYSQL_DSN; an embedded backend lives inside `seckill serve` and is rebuilt from the database at its start")
	}
	log := infra.NewCLILogger(cfg, stderr)
	infra.WarnUnknownVariables(log, os.Environ())
	rec, cleanup, err := infra.BuildReconcile(cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()

	id := domain.VoucherID(*voucher)
	if !*fix {
		r, err := rec.Check(ctx, id)
		if err != nil {
			return err
		}
		printReport(stdout, "", r)
		return verdict(r)
	}
	before, err := rec.Check(ctx, id)
	if err != nil {
		return err
	}
	printReport(stdout, "before: ", before)
	after, err := rec.Fix(ctx, id)
	if err != nil {
		return err
	}
	printReport(stdout, "after:  ", after)
	if !after.Consistent() {
		return fmt.Errorf("voucher %d still differs after the fix (were claims running?)", id)
	}
	return nil
}

// verdict is the check's exit status: orders only in flight are not a
// difference (fulfilment is merely not done yet), anything else is.
func verdict(r application.Report) error {
	if r.Consistent() || r.OnlyInFlight() {
		return nil
	}
	return errDifferences
}

func printReport(w io.Writer, label string, r application.Report) {
	pending := "unknown (channel queue: in the service's process)"
	if r.Pending >= 0 {
		pending = fmt.Sprint(r.Pending)
	}
	gate := "absent"
	if r.GateFound {
		gate = fmt.Sprintf("stock %d, buyers %d", r.GateStock, r.GateBuyers)
	}
	state := "consistent"
	switch {
	case r.OnlyInFlight():
		state = "consistent but for orders in flight"
	case !r.Consistent():
		state = "DIFFERENT"
	}
	fmt.Fprintf(w, "%svoucher %d: %s\n", label, r.Voucher, state)
	fmt.Fprintf(w, "%s  mysql:   stock %d, orders %d\n", label, r.DBStock, r.DBOrders)
	fmt.Fprintf(w, "%s  redis:   %s\n", label, gate)
	fmt.Fprintf(w, "%s  pending: %s\n", label, pending)
	if r.Pending >= 0 {
		fmt.Fprintf(w, "%s  in flight (claimed, queued in the stream): %d%s\n", label, len(r.InFlight), sample(r.InFlight))
	}
	fmt.Fprintf(w, "%s  claimed in redis, not in mysql: %d%s\n", label, len(r.NotInDB), sample(r.NotInDB))
	fmt.Fprintf(w, "%s  in mysql, not in redis:         %d%s\n", label, len(r.NotInGate), sample(r.NotInGate))
	switch {
	case r.OnlyInFlight():
		fmt.Fprintf(w, "%s  only orders in flight differ (%d): nothing to repair; run again once the workers have caught up\n", label, len(r.InFlight))
	case r.QueuePartial && len(r.NotInDB) > 0:
		fmt.Fprintf(w, "%s  the stream holds more entries than one check reads: some of the orders claimed in redis, not in mysql may still be in flight; run again once the workers have caught up\n", label)
	case r.Pending < 0 && len(r.NotInDB) > 0:
		fmt.Fprintf(w, "%s  channel queue: orders in a running instance's channel cannot be seen from here and show as claimed in redis, not in mysql until written; with no instance running they are lost\n", label)
	}
}

func sample(os []domain.VoucherOrder) string {
	if len(os) == 0 {
		return ""
	}
	s := " e.g."
	for _, o := range os[:min(3, len(os))] {
		s += fmt.Sprintf(" order %d (user %d)", o.ID(), o.UserID())
	}
	return s
}
