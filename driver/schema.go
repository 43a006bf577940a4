package driver

import "context"

// Schemer is implemented by stores that keep their locks in objects a
// database administrator may want to create and review first (tables,
// sequences): the SQL stores. `dlock schema --store URL` prints Schema, and
// `dlock schema --apply` runs Migrate.
//
// Absent: the store needs no schema (Redis, etcd, ZooKeeper create what
// they use as they go); `dlock schema` says so and exits with 64, as the
// CLI does for every capability a store lacks.
type Schemer interface {
	// Schema returns the statements that create everything the store uses,
	// as the store would run them: idempotent (IF NOT EXISTS), separated by
	// semicolons and newlines, with comments naming each object's purpose.
	// It does no I/O.
	Schema() string
	// Migrate runs Schema's statements on the store's database. It is
	// idempotent: on a database that already has them it changes nothing.
	// On error some objects may exist; running it again completes them.
	Migrate(ctx context.Context) error
}
