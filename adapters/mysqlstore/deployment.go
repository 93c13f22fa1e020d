package mysqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// DeploymentID returns the database's deployment identity, creating it on the
// first call: a random id in tb_deployment's one row. Instances starting at
// once each try to insert their own; the first insert wins and every one of
// them reads the winner's.
func DeploymentID(ctx context.Context, db bun.IDB) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("deployment id: %w", err)
	}
	insert := "INSERT IGNORE INTO tb_deployment (id, deployment_id) VALUES (1, ?)"
	if db.Dialect().Name() == dialect.SQLite {
		insert = "INSERT OR IGNORE INTO tb_deployment (id, deployment_id) VALUES (1, ?)"
	}
	if _, err := db.NewRaw(insert, hex.EncodeToString(b)).Exec(ctx); err != nil {
		return "", fmt.Errorf("write the deployment id (tb_deployment; is the database migrated?): %w", err)
	}
	var id string
	if err := db.NewRaw("SELECT deployment_id FROM tb_deployment WHERE id = 1").Scan(ctx, &id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}
