package mysqlstore_test

import (
	"errors"
	"fmt"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/internal/mysqlserver"
	"example.com/dlock/mysqlstore"
)

// Migrate on a server that refuses the connection (a wrong password)
// matches driver.ErrRefused, as Open's ping does: retrying cannot fix it.
// The control: the right password migrates.
func TestMigrateWrongPasswordIsRefused(t *testing.T) {
	srv := shared(t)
	opts := mysqlstore.Options{Table: uniqTable(t)}
	dsn := fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true", mysqlserver.User, "wrong-"+mysqlserver.Password, srv.Addr(), mysqlserver.Database)
	err := mysqlstore.Migrate(ctxT(t), openDB(t, dsn), opts)
	if !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("wrong password: %v, want ErrRefused", err)
	}
	if err := mysqlstore.Migrate(ctxT(t), openDB(t, srv.DSN()), opts); err != nil {
		t.Fatalf("control, the right password: %v", err)
	}
}
