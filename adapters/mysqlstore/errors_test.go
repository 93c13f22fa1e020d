package mysqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/hmdp-go/seckill/ports"
)

func TestWrapMarksTransientErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name      string
		err       error
		transient bool
		permanent bool
	}{
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, true, false},
		{"lock_wait_timeout", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true, false},
		{"too_many_connections", &mysql.MySQLError{Number: 1040}, true, false},
		{"read_only", &mysql.MySQLError{Number: 1290, Message: "running with the --read-only option"}, true, false},
		{"bad_connection", driver.ErrBadConn, true, false},
		{"invalid_connection", mysql.ErrInvalidConn, true, false},
		{"connection_refused", fmt.Errorf("dial: %w", refused), true, false},
		{"duplicate_entry", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false, false},
		{"check_violation", &mysql.MySQLError{Number: 4025, Message: "CONSTRAINT failed"}, false, true},
		{"out_of_range", &mysql.MySQLError{Number: 1264, Message: "Out of range value"}, false, true},
		{"data_too_long", &mysql.MySQLError{Number: 1406, Message: "Data too long"}, false, true},
		{"foreign_key", &mysql.MySQLError{Number: 1452, Message: "Cannot add or update a child row"}, false, true},
		{"other", errors.New("syntax error"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := wrap("create batch", tc.err)
			if got := errors.Is(err, ErrTransient); got != tc.transient {
				t.Fatalf("errors.Is(%v, ErrTransient) = %v, want %v", err, got, tc.transient)
			}
			if got := errors.Is(err, ports.ErrPermanent); got != tc.permanent {
				t.Fatalf("errors.Is(%v, ports.ErrPermanent) = %v, want %v", err, got, tc.permanent)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("wrap lost the cause: %v", err)
			}
		})
	}
	if wrap("nothing", nil) != nil {
		t.Fatal("wrap(nil) must be nil")
	}
}

func TestOpenMySQLNeedsADatabaseName(t *testing.T) {
	if _, err := OpenMySQL("root@tcp(127.0.0.1:1)/"); err == nil {
		t.Fatal("a DSN without a database name was accepted")
	}
}
