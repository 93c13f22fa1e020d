package mysqlstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// The two sets describe the same schema; each dialect gets its own SQL
// because DDL is where MySQL and SQLite differ most.
//
//go:embed migrations/mysql/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// A start waits for another instance's migration by polling its lock; these
// migrations take seconds, so a lock older than lockWait is a crashed one.
const (
	lockPoll = 100 * time.Millisecond
	lockWait = time.Minute
)

// migrationsOf are the migration files of db's dialect.
func migrationsOf(db *bun.DB) (fs.FS, error) {
	var dir string
	switch db.Dialect().Name() {
	case dialect.MySQL:
		dir = "migrations/mysql"
	case dialect.SQLite:
		dir = "migrations/sqlite"
	default:
		return nil, fmt.Errorf("no migrations for the %s dialect", db.Dialect().Name())
	}
	return fs.Sub(migrationFiles, dir)
}

// newMigrator also creates the migration tables when they are missing.
func newMigrator(ctx context.Context, db *bun.DB) (*migrate.Migrator, error) {
	sub, err := migrationsOf(db)
	if err != nil {
		return nil, err
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return nil, fmt.Errorf("discover migrations: %w", err)
	}
	// Mark a migration applied only once it succeeded: MySQL DDL is not
	// transactional, so a half-applied migration must be re-run (the
	// statements are idempotent), not skipped.
	m := migrate.NewMigrator(db, ms, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("create migration tables: %w", err)
	}
	return m, nil
}

// Migrate applies the pending migrations and returns their names. Several
// instances may start at once: they queue on the migrator's lock, and the
// ones that get it after the first find nothing left to do.
func Migrate(ctx context.Context, db *bun.DB) (applied []string, err error) {
	err = withLock(ctx, db, func(m *migrate.Migrator) error {
		group, err := m.Migrate(ctx)
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		for _, mig := range group.Migrations {
			applied = append(applied, mig.String())
		}
		return nil
	})
	return applied, err
}

// MigrationStatus lists the migrations by state, oldest first.
type MigrationStatus struct {
	Applied []string
	Pending []string
}

func (s MigrationStatus) String() string {
	list := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("applied: %s\npending: %s", list(s.Applied), list(s.Pending))
}

// Status reports which migrations are applied and which are pending.
func Status(ctx context.Context, db *bun.DB) (MigrationStatus, error) {
	var st MigrationStatus
	m, err := newMigrator(ctx, db)
	if err != nil {
		return st, err
	}
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("read migration status: %w", err)
	}
	for _, mig := range ms {
		if mig.IsApplied() {
			st.Applied = append(st.Applied, mig.String())
		} else {
			st.Pending = append(st.Pending, mig.String())
		}
	}
	return st, nil
}

// withLock runs fn holding the migrator's lock, waiting up to lockWait for it
// while another process holds it. The lock is a row in bun_migration_locks: a
// process killed while migrating leaves it behind, and the error then says
// how to clear it.
func withLock(ctx context.Context, db *bun.DB, fn func(*migrate.Migrator) error) (err error) {
	m, err := newMigrator(ctx, db)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(lockWait)
	for {
		lockErr := m.Lock(ctx)
		if lockErr == nil {
			break
		}
		// Another instance holds the lock (duplicate key), or took it at the
		// same instant and InnoDB chose us as the deadlock victim: wait either way.
		if !isDuplicateKey(lockErr) && !isTransient(lockErr) {
			return fmt.Errorf("take the migration lock: %w", lockErr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the migration lock has been held for over %s; if no migration is running, "+
				"a crashed one left it behind: DELETE FROM bun_migration_locks", lockWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the migration lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	defer func() {
		// Unlock even when ctx has ended, or the next start would wait on us.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
		defer cancel()
		if uerr := m.Unlock(uctx); uerr != nil {
			err = errors.Join(err, fmt.Errorf("release the migration lock: %w", uerr))
		}
	}()
	return fn(m)
}
