package mysqlstore_test

import (
	"database/sql"
	"testing"

	"example.com/dlock/driver"
	"example.com/dlock/mysqlstore"
)

// TestSessionHasNoFamily: the session lock (GET_LOCK: no shared mode, no
// data kept with a lock) offers neither the read-write lock nor the
// semaphore, as docs/mysql.md says, so driver.As finds neither and the
// CLI's --shared, --exclusive and --permits refuse it (64). Control: the
// lease table on the same pool offers both.
func TestSessionHasNoFamily(t *testing.T) {
	db, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/none") // no I/O: New and NewSession only keep it
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sess, err := mysqlstore.NewSession(db, mysqlstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	lease, err := mysqlstore.New(db, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		st   driver.Store
		want bool
	}{{"session", sess, false}, {"lease (control)", lease, true}} {
		_, rw := driver.As[driver.RWMutex](c.st)
		_, sem := driver.As[driver.Semaphore](c.st)
		if rw != c.want || sem != c.want {
			t.Errorf("%s: RWMutex %v, Semaphore %v; want %v", c.name, rw, sem, c.want)
		}
	}
}
