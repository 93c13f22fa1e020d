package mysqlstore

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

//go:embed migrations/mysql/*.sql migrations/sqlite/*.sql
var migrationFiles embed.FS

// A start polls another's migration lock; migrations take seconds, so one held past lockWait is a crashed one's.
const (
	lockPoll = 100 * time.Millisecond
	lockWait = time.Minute
)

// migrationsOf are the migration files of db's dialect.
func migrationsOf(db *bun.DB) (fs.FS, error) {
	d := db.Dialect().Name()
	if d != dialect.MySQL && d != dialect.SQLite {
		return nil, fmt.Errorf("no migrations for the %s dialect", d)
	}
	return fs.Sub(migrationFiles, "migrations/"+d.String())
}

func newMigrator(ctx context.Context, db *bun.DB) (*migrate.Migrator, error) {
	sub, err := migrationsOf(db)
	if err != nil {
		return nil, err
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return nil, fmt.Errorf("discover migrations: %w", err)
	}
	// MySQL DDL is not transactional: a half-applied migration must be re-run (it is idempotent).
	m := migrate.NewMigrator(db, ms, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("create migration tables: %w", err)
	}
	return m, nil
}

// Migrate applies the pending migrations and returns their names; instances starting at once queue.
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
	return fmt.Sprintf("applied: %s\npending: %s",
		cmp.Or(strings.Join(s.Applied, ", "), "none"), cmp.Or(strings.Join(s.Pending, ", "), "none"))
}

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

// withLock runs fn holding the migrator's lock, waiting up to lockWait for another process's.
func withLock(ctx context.Context, db *bun.DB, fn func(*migrate.Migrator) error) (err error) {
	m, err := newMigrator(ctx, db)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(lockWait)
	for lockErr := m.Lock(ctx); lockErr != nil; lockErr = m.Lock(ctx) {
		// Another instance holds the lock, or took it at once and we were InnoDB's deadlock victim.
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

// DataLossError: rolling back Migration, unforced, would drop tables (or their columns) holding rows.
type DataLossError struct {
	Migration string
	Tables    []string
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("rolling back %s would destroy data: %s hold rows; nothing was rolled back",
		e.Migration, strings.Join(e.Tables, ", "))
}

// Rollback undoes the newest applied migration, alone whatever group it was applied in. Unless force
// is set it refuses, with a *DataLossError, one whose down script drops a table, or a column of a
// table, that holds rows. It returns the name rolled back, if any.
func Rollback(ctx context.Context, db *bun.DB, force bool) (rolledBack []string, err error) {
	err = withLock(ctx, db, func(m *migrate.Migrator) error {
		ms, err := m.MigrationsWithStatus(ctx)
		if err != nil {
			return fmt.Errorf("read migration status: %w", err)
		}
		group := ms.LastGroup() // its migrations in name order, as ms is
		if group.ID == 0 {
			return nil
		}
		mig := group.Migrations[len(group.Migrations)-1]
		if !force {
			held, err := tablesWithRowsDroppedBy(ctx, db, mig)
			if err != nil {
				return err
			}
			if len(held) > 0 {
				return &DataLossError{Migration: mig.String(), Tables: held}
			}
		}
		if mig.Down != nil {
			if err := mig.Down(ctx, m, &mig); err != nil {
				return fmt.Errorf("migrate down %s: %w", mig.String(), err)
			}
		}
		if err := m.MarkUnapplied(ctx, &mig); err != nil {
			return fmt.Errorf("mark %s unapplied: %w", mig.String(), err)
		}
		rolledBack = []string{mig.String()}
		return nil
	})
	return rolledBack, err
}

// What a down script destroys: a table it drops, or a table it drops a column of.
var (
	dropTable  = regexp.MustCompile("(?i)\\bDROP\\s+TABLE\\s+(?:IF\\s+EXISTS\\s+)?[`\"]?(\\w+)")
	dropColumn = regexp.MustCompile("(?i)\\bALTER\\s+TABLE\\s+[`\"]?(\\w+)[`\"]?\\s+DROP\\b")
	sqlComment = regexp.MustCompile(`--[^\n]*`)
)

func tablesWithRowsDroppedBy(ctx context.Context, db *bun.DB, mig migrate.Migration) ([]string, error) {
	files, err := migrationsOf(db)
	if err != nil {
		return nil, err
	}
	script, err := fs.ReadFile(files, mig.String()+".down.sql")
	if errors.Is(err, fs.ErrNotExist) {
		script, err = fs.ReadFile(files, mig.String()+".tx.down.sql")
	}
	if err != nil {
		return nil, fmt.Errorf("read the down script of %s: %w", mig.String(), err)
	}
	text := sqlComment.ReplaceAllString(string(script), "")
	var dropped []string
	for _, re := range []*regexp.Regexp{dropTable, dropColumn} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			dropped = append(dropped, m[1])
		}
	}
	slices.Sort(dropped)
	var held []string
	for _, table := range slices.Compact(dropped) {
		rows, err := hasRows(ctx, db, table)
		if err != nil {
			return nil, err
		}
		if rows {
			held = append(held, table)
		}
	}
	return held, nil
}

func hasRows(ctx context.Context, db *bun.DB, table string) (bool, error) {
	var exists int
	q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	if db.Dialect().Name() == dialect.SQLite {
		q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	}
	if err := db.NewRaw(q, table).Scan(ctx, &exists); err != nil {
		return false, fmt.Errorf("does %s exist: %w", table, err)
	}
	if exists == 0 {
		return false, nil
	}
	held, err := db.NewSelect().Table(table).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("does %s hold rows: %w", table, err)
	}
	return held, nil
}
