package mysqlstore

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestWrapMarksTransientErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name      string
		err       error
		transient bool
	}{
		{"deadlock", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}, true},
		{"lock_wait_timeout", &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true},
		{"too_many_connections", &mysql.MySQLError{Number: 1040}, true},
		{"bad_connection", driver.ErrBadConn, true},
		{"invalid_connection", mysql.ErrInvalidConn, true},
		{"connection_refused", fmt.Errorf("dial: %w", refused), true},
		{"duplicate_entry", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{"check_violation", &mysql.MySQLError{Number: 4025, Message: "CONSTRAINT failed"}, false},
		{"other", errors.New("syntax error"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := wrap("create batch", tc.err)
			if got := errors.Is(err, ErrTransient); got != tc.transient {
				t.Fatalf("errors.Is(%v, ErrTransient) = %v, want %v", err, got, tc.transient)
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
