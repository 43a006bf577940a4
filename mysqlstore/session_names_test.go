package mysqlstore_test

import (
	"database/sql"
	"testing"
	"time"

	"example.com/dlock/mysqlstore"
)

// TestSessionOldNames: Session and CheckEvery, the old names of
// SessionStore and CheckInterval, still work: CheckEvery sets the check
// interval when CheckInterval is zero, and CheckInterval wins over it.
func TestSessionOldNames(t *testing.T) {
	db, err := sql.Open("mysql", "u:p@tcp(127.0.0.1:1)/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		opts mysqlstore.SessionOptions
		want time.Duration
	}{
		{mysqlstore.SessionOptions{}, 5 * time.Second},
		{mysqlstore.SessionOptions{CheckEvery: 2 * time.Second}, 2 * time.Second},
		{mysqlstore.SessionOptions{CheckInterval: 3 * time.Second}, 3 * time.Second},
		{mysqlstore.SessionOptions{CheckInterval: 3 * time.Second, CheckEvery: 2 * time.Second}, 3 * time.Second},
	} {
		var s *mysqlstore.Session
		s, err := mysqlstore.NewSession(db, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Model().SessionTTL; got != tc.want {
			t.Errorf("%+v: SessionTTL %v, want %v", tc.opts, got, tc.want)
		}
	}
}
