package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// errDifferences: the gate and the database disagree and --fix was not given.
var errDifferences = errors.New("Redis and MySQL disagree (run with --fix, while no claims are running, to repair Redis from MySQL)")

func reconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reconcile", `usage: seckill reconcile --voucher ID [--fix]

Compares one sale's gate in Redis (stock left, buyers marked, orders still
queued) with MySQL, the source of truth, prints what differs and exits 1 when
anything does. --fix rebuilds the gate from MySQL; run it only while no claims
are served. Needs SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS) and
SECKILL_MYSQL_DSN.

flags:
`, stderr)
	voucher := fs.Int64("voucher", 0, "seckill voucher id to reconcile (required)")
	fix := fs.Bool("fix", false, "repair Redis from MySQL (the source of truth); run only while no claims are served")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *voucher <= 0 {
		return errors.New("reconcile: --voucher must be a positive voucher id")
	}
	cfg, log, err := loadCLI(stderr)
	if err != nil {
		return err
	}
	if !cfg.RealRedis() || cfg.MySQLDSN == "" {
		return errors.New("reconcile: set SECKILL_REDIS_URL (or SECKILL_REDIS_CLUSTER_ADDRS) and SECKILL_MYSQL_DSN; an embedded backend lives inside `seckill serve` and is rebuilt from the database at its start")
	}
	rec, cleanup, err := infra.BuildReconcile(cfg, log)
	if err != nil {
		return err
	}
	defer cleanup()
	id := domain.VoucherID(*voucher)
	before, err := rec.Check(ctx, id)
	if err != nil {
		return err
	}
	if !*fix {
		printReport(stdout, "", before)
		return verdict(before)
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

// verdict: orders only in flight are not a difference.
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
	if r.HasBooks {
		b := r.Books
		fmt.Fprintf(w, "%s  orders:  unpaid %d, paid %d; cancelled %d, refunding %d (units returned); failed %d\n",
			label, b.Unpaid, b.Paid, b.Cancelled, b.Refunding, b.Failed)
		fmt.Fprintf(w, "%s  refunds: %d payments owed back (%d fen), %d of them double charges\n",
			label, b.RefundsOwed, b.RefundsOwedFen, b.DoubleCharges)
	}
	fmt.Fprintf(w, "%s  redis:   %s\n", label, gate)
	fmt.Fprintf(w, "%s  pending: %s\n", label, pending)
	if r.Pending >= 0 {
		fmt.Fprintf(w, "%s  in flight (claimed, queued in the stream): %d%s\n", label, len(r.InFlight), sample(r.InFlight))
	}
	fmt.Fprintf(w, "%s  claimed in redis, not in mysql: %d%s\n", label, len(r.NotInDB), sample(r.NotInDB))
	fmt.Fprintf(w, "%s  in mysql, not in redis:         %d%s\n", label, len(r.NotInGate), sample(r.NotInGate))
	fmt.Fprintf(w, "%s    of which redis forgot (no mark for the user): %d\n", label, r.Forgotten)
	if r.GateFound { // negative by the claims in flight, positive when redis forgot orders
		fmt.Fprintf(w, "%s  stock difference (redis - mysql): %d\n", label, r.GateStock-r.DBStock)
	}
	for _, why := range differences(r) {
		fmt.Fprintf(w, "%s  %s\n", label, why)
	}
	switch {
	case r.OnlyInFlight():
		fmt.Fprintf(w, "%s  only orders in flight differ (%d): nothing to repair; run again once the workers have caught up\n", label, len(r.InFlight))
	case r.QueuePartial && len(r.NotInDB) > 0:
		fmt.Fprintf(w, "%s  the stream holds more entries than one check reads: some of the orders claimed in redis, not in mysql may still be in flight; run again once the workers have caught up\n", label)
	case r.Pending < 0 && len(r.NotInDB) > 0:
		fmt.Fprintf(w, "%s  channel queue: orders in a running instance's channel cannot be seen from here and show as claimed in redis, not in mysql until written; with no instance running they are lost\n", label)
	}
}

const cannotSee = "not visible to any check: a claim answered success whose order Redis lost before it reached mysql " +
	"(its mark and, in stream mode, its queue entry) leaves no trace in either; it cannot be recovered, only prevented " +
	"(SECKILL_REDIS_WAIT_REPLICAS, or AOF with appendfsync always)"

// differences names every reason a report is not consistent: a DIFFERENT verdict never stands unexplained.
func differences(r application.Report) []string {
	var out []string
	lost := false
	if !r.GateFound {
		lost = true
		out = append(out, "redis holds no gate for this voucher (it lost the keys): a running service rebuilds it from mysql within its repair interval (5 s); or run --fix")
	}
	if r.Forgotten > 0 {
		lost = true
		out = append(out, fmt.Sprintf("redis forgot %d committed orders (it lost writes: a restart without persistence, a failover to a replica that lagged); "+
			"a running service puts their buyers back and takes their units within its repair interval (5 s); or run --fix", r.Forgotten))
	}
	if n := len(r.NotInGate) - r.Forgotten; n > 0 {
		out = append(out, fmt.Sprintf("%d users hold an order in mysql and another order's mark in redis (a claim made again after redis forgot theirs, refused by mysql as a duplicate)", n))
	}
	if d := r.Unaccounted(); d != 0 {
		out = append(out, fmt.Sprintf("the stock differs by %d units more than the orders above account for (redis %d, mysql %d)", d, r.GateStock, r.DBStock))
	}
	if lost {
		out = append(out, cannotSee)
	}
	return out
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
