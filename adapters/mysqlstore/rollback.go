package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// DataLossError: rolling back Migration would drop tables, or columns of
// tables, that hold rows (vouchers, orders: the sale's record), and the
// caller did not force it.
type DataLossError struct {
	Migration string
	Tables    []string
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("rolling back %s would destroy data: %s hold rows; nothing was rolled back",
		e.Migration, strings.Join(e.Tables, ", "))
}

// Rollback undoes the newest applied migration, one at a time whatever group
// it was applied in (a first start applies every migration in one group, and
// rolling that back dropped every table). It refuses, with a *DataLossError,
// a migration whose down script drops a table, or a column of a table, that
// holds rows, unless force is set. It returns the name of the migration
// rolled back, or none when nothing is applied.
func Rollback(ctx context.Context, db *bun.DB, force bool) (rolledBack []string, err error) {
	err = withLock(ctx, db, func(m *migrate.Migrator) error {
		ms, err := m.MigrationsWithStatus(ctx)
		if err != nil {
			return fmt.Errorf("read migration status: %w", err)
		}
		applied := ms.Applied()
		if len(applied) == 0 {
			return nil
		}
		// The last applied: the newest group, and in it the newest name, as
		// bun's own Rollback orders them.
		sort.SliceStable(applied, func(i, j int) bool {
			if applied[i].GroupID != applied[j].GroupID {
				return applied[i].GroupID > applied[j].GroupID
			}
			return applied[i].Name > applied[j].Name
		})
		mig := applied[0]
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

// What a down script destroys: a table it drops, or a table it drops a
// column of. Names may be quoted with backticks or double quotes.
var (
	dropTable  = regexp.MustCompile("(?i)\\bDROP\\s+TABLE\\s+(?:IF\\s+EXISTS\\s+)?[`\"]?(\\w+)")
	dropColumn = regexp.MustCompile("(?i)\\bALTER\\s+TABLE\\s+[`\"]?(\\w+)[`\"]?\\s+DROP\\b")
	sqlComment = regexp.MustCompile(`--[^\n]*`)
)

// tablesWithRowsDroppedBy lists the tables whose data mig's down script
// destroys and that hold at least one row.
func tablesWithRowsDroppedBy(ctx context.Context, db *bun.DB, mig migrate.Migration) ([]string, error) {
	files, err := migrationsOf(db)
	if err != nil {
		return nil, err
	}
	var script []byte
	for _, name := range []string{mig.String() + ".down.sql", mig.String() + ".tx.down.sql"} {
		if script, err = fs.ReadFile(files, name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the down script of %s: %w", mig.String(), err)
	}
	text := sqlComment.ReplaceAllString(string(script), "")
	seen := map[string]bool{}
	var held []string
	for _, re := range []*regexp.Regexp{dropTable, dropColumn} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			table := m[1]
			if seen[table] {
				continue
			}
			seen[table] = true
			rows, err := hasRows(ctx, db, table)
			if err != nil {
				return nil, err
			}
			if rows {
				held = append(held, table)
			}
		}
	}
	sort.Strings(held)
	return held, nil
}

// hasRows: table exists and holds at least one row.
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
	var one int
	err := db.NewRaw("SELECT 1 FROM ? LIMIT 1", bun.Ident(table)).Scan(ctx, &one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("does %s hold rows: %w", table, err)
	}
	return true, nil
}
