package mysqlstore_test

import (
	"database/sql"

	"example.com/dlock/internal/faulttest"
)

// Child processes for the multi-process fault tests: the test binary,
// started again by roles.Start with MYSQLSTORE_CHILD_ROLE set, runs one
// registered role from init (before TestMain, which would start a server)
// and exits with its outcome (status 1 and the error on stderr).
var roles = faulttest.NewRoles("MYSQLSTORE_CHILD_ROLE")

func init() { roles.Run() }

// childDB opens a pool of at most maxConns connections on dsn.
func childDB(dsn string, maxConns int) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	return db, nil
}
