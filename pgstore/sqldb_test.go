package pgstore_test

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"testing"

	"example.com/dlock/pgstore"
	"github.com/jackc/pgx/v5/stdlib"
)

// otherDriver is a database/sql driver that is not pgx's stdlib one (its
// connections wrap pgx's), as lib/pq would be.
type otherDriver struct{}

type otherConn struct{ sqldriver.Conn }

func (otherDriver) Open(name string) (sqldriver.Conn, error) {
	c, err := stdlib.GetDefaultDriver().Open(name)
	if err != nil {
		return nil, err
	}
	return otherConn{c}, nil
}

func init() { sql.Register("dlock-other-pg", otherDriver{}) }

// TestNewDBWithAnotherDriver: a *sql.DB of a driver that is not pgx's cannot
// LISTEN, so Subscribe says errors.ErrUnsupported (the client then backs
// off), at once and again on the next call. Control: the same *sql.DB does
// reach the server.
func TestNewDBWithAnotherDriver(t *testing.T) {
	db, err := sql.Open("dlock-other-pg", server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(ctx(t)); err != nil {
		t.Fatalf("control: %v", err)
	}
	s, err := pgstore.NewDB(db, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx(t))
	for i := range 2 {
		if _, _, err := s.Subscribe(ctx(t), "k"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Subscribe %d through another driver = %v; want ErrUnsupported", i, err)
		}
	}
}
