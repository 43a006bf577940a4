package mysqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/dlock/driver"
	"example.com/dlock/internal/testkit"
	"example.com/dlock/mysqlstore"
)

// TestRWExtensionInFlightIsCounted: a read holding whose lease has just
// ended on the server clock while an extension of it is in flight (an open
// transaction that extended it before the expiry holds its row) is not
// taken for expired: the acquisition's DELETE of the expired holdings it
// read waits for the row, re-checks the expiry on the extended row and
// keeps it, and the read after it counts the reader, so a writer is
// refused. Control (WithoutRWPrune): an acquisition that skips expired rows
// reads the old row without waiting, admits the writer, and the extension
// then commits: a writer beside a reader.
func TestRWExtensionInFlightIsCounted(t *testing.T) {
	for _, c := range []struct {
		name  string
		prune bool
	}{{"DeleteExpired", true}, {"ControlSkipExpired", false}} {
		t.Run(c.name, func(t *testing.T) {
			stores, permits := permitStoresOn(t, 1, func(s *mysqlstore.Store) {
				if !c.prune {
					mysqlstore.WithoutRWPrune(s)
				}
			})
			s, table := stores[0], strings.TrimSuffix(permits, "_permits")+"_rwholds"
			admin := openDB(t, shared(t).DSN())
			if _, err := s.AcquireRead(ctxT(t), "k", "reader", 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			tx, err := admin.BeginTx(ctxT(t), nil) // the extension in flight
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.Exec("UPDATE " + table + " SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE WHERE name = 'k' AND expires_at > UTC_TIMESTAMP(6)"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 10*time.Second, "the holding's old expiry", func() bool {
				var ok bool
				return admin.QueryRow("SELECT UTC_TIMESTAMP(6) > (SELECT expires_at FROM "+table+" WHERE name = 'k')").Scan(&ok) == nil && ok
			})
			done := make(chan error, 1)
			go func() {
				_, err := s.AcquireWrite(ctxT(t), "k", "writer", time.Minute)
				done <- err
			}()
			var (
				got      error
				returned bool
			)
			testkit.WaitFor(t, 10*time.Second, "the acquisition returning or waiting for the row lock", func() bool {
				select {
				case got = <-done:
					returned = true
					return true
				default:
				}
				var n int // a statement of the acquisition on the table running for 50 ms: waiting for the row
				err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query'" +
					" AND INFO LIKE '% " + table + " %' AND TIME_MS >= 50").Scan(&n)
				return err == nil && n > 0
			})
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if !returned {
				got = <-done
			}
			switch {
			case c.prune && !errors.Is(got, driver.ErrNotAcquired):
				t.Fatalf("the writer: %v; want refused (ErrNotAcquired): the extended reader still holds the key", got)
			case !c.prune && got != nil:
				t.Fatalf("control: the writer: %v; want admitted (the overlap the deletion prevents)", got)
			}
			t.Logf("the writer: %v", got)
		})
	}
}
