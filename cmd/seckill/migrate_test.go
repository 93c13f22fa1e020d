package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hmdp-go/seckill/adapters/mysqlstore"
)

// seckill migrate down on a database holding a sale refuses, says how to
// force it, and --force (after the action, as README writes it) rolls back
// one migration.
func TestMigrateDownCommand(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"SECKILL_REDIS_URL", "SECKILL_REDIS_CLUSTER_ADDRS", "SECKILL_MYSQL_DSN"} {
		t.Setenv(k, "")
	}
	t.Setenv("SECKILL_DATA_DIR", dir)
	migrateCmd := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(t.Context(), append([]string{"migrate"}, args...), &out, &errOut)
		return out.String(), err
	}
	if _, err := migrateCmd("up"); err != nil {
		t.Fatal(err)
	}
	db, err := mysqlstore.OpenSQLite(dir + "/seckill.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO tb_voucher (id, title, pay_value, actual_value, type) VALUES (1, 'v', 1, 1, 1)",
		"INSERT INTO tb_seckill_voucher (voucher_id, stock, begin_time, end_time) VALUES (1, 5, '2026-01-01', '2027-01-01')",
		"INSERT INTO tb_deployment (id, deployment_id) VALUES (1, 'd1')",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()

	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{name: "force_on_up_refused", args: []string{"up", "--force"}, wantErr: "--force applies to migrate down only"},
		{name: "extra_argument_refused", args: []string{"down", "now"}, wantErr: "exactly one of"},
		// The limit per user's columns hold the sales' rule.
		{name: "limit_columns_refused", args: []string{"down"}, wantErr: "migrate down --force"},
		{name: "limit_columns_forced", args: []string{"down", "--force"}, wantOut: "rolled back: 20261209000011_limit_per_user\n"},
		// The sale controls' columns hold the sales' state.
		{name: "sale_control_columns_refused", args: []string{"down"}, wantErr: "migrate down --force"},
		{name: "sale_control_columns_forced", args: []string{"down", "--force"}, wantOut: "rolled back: 20261208000001_sale_controls\n"},
		// The order list's index and the empty audit trail go without --force.
		{name: "order_list_index_goes", args: []string{"down"}, wantOut: "rolled back: 20261207000042_add_order_list_index\n"},
		{name: "empty_audit_trail_goes", args: []string{"down"}, wantOut: "rolled back: 20261207000041_create_admin_audit\n"},
		// No order: the forfeit rule's column goes without --force.
		{name: "empty_forfeit_column_goes", args: []string{"down"}, wantOut: "rolled back: 20261206000001_forfeit_after_cancel\n"},
		// The waiting room's columns hold the sale's settings.
		{name: "room_columns_refused", args: []string{"down"}, wantErr: "migrate down --force"},
		{name: "room_columns_forced", args: []string{"down", "--force"}, wantOut: "rolled back: 20261205000001_add_waiting_room\n"},
		{name: "empty_payments_go", args: []string{"down"}, wantOut: "rolled back: 20261204000001_payments\n"},
		{name: "empty_orders_go", args: []string{"down"}, wantOut: "rolled back: 20261203000001_order_lifecycle\n"},
		{name: "rows_refused", args: []string{"down"}, wantErr: "migrate down --force"},
		{name: "forced_after_action", args: []string{"down", "--force"}, wantOut: "rolled back: 20261202000001_create_deployment\n"},
		{name: "forced_before_action", args: []string{"--force", "down"}, wantOut: "rolled back: 20261201000012_add_seckill_buckets\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := migrateCmd(tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || out != tt.wantOut {
				t.Fatalf("out %q, err %v; want %q", out, err, tt.wantOut)
			}
		})
	}
}
