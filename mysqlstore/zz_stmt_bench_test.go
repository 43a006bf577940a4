package mysqlstore_test

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"example.com/dlock/mysqlstore"
)

func dg(s string) []byte { d := sha256.Sum256([]byte(s)); return d[:] }

// Throwaway: compares statement variants for a hand-over chain on one key.
func TestZZStmtBench(t *testing.T) {
	_, opts := migrated(t, mysqlstore.Options{})
	db := openDB(t, shared(t).DSN("interpolateParams=true"))
	s, _ := mysqlstore.New(db, opts)
	L, F := opts.Table+"_locks", opts.Table+"_fence"
	if _, err := s.Acquire(ctxT(t), "hot", "t0", time.Hour); err != nil {
		t.Fatal(err)
	}
	cur := "t0"
	n := 0
	next := func() string { n++; return fmt.Sprint("t", n) }
	now := "UTC_TIMESTAMP(6)"
	variants := map[string]func() error{
		"odku": func() error {
			to := next()
			_, err := s.Transfer(ctxT(t), "hot", cur, to, time.Hour)
			cur = to
			return err
		},
		"update-lastid-nextval": func() error {
			to := next()
			r, err := db.Exec("UPDATE "+L+" SET fence = LAST_INSERT_ID(NEXTVAL("+F+")), expires_at = "+now+" + INTERVAL ? MICROSECOND, owner = ? WHERE name = ? AND owner = ? AND holds = 1 AND expires_at > "+now,
				time.Hour.Microseconds(), dg(to), []byte("hot"), dg(cur))
			if err != nil {
				return err
			}
			a, _ := r.RowsAffected()
			id, _ := r.LastInsertId()
			if a != 1 || id == 0 {
				return fmt.Errorf("affected %d id %d", a, id)
			}
			cur = to
			return nil
		},
		"update-lastid-plus1": func() error {
			to := next()
			r, err := db.Exec("UPDATE "+L+" SET fence = LAST_INSERT_ID(fence + 1), expires_at = "+now+" + INTERVAL ? MICROSECOND, owner = ? WHERE name = ? AND owner = ? AND holds = 1 AND expires_at > "+now,
				time.Hour.Microseconds(), dg(to), []byte("hot"), dg(cur))
			if err != nil {
				return err
			}
			a, _ := r.RowsAffected()
			if a != 1 {
				return fmt.Errorf("affected %d", a)
			}
			cur = to
			return nil
		},
		"select1": func() error { var x int; return db.QueryRow("SELECT 1").Scan(&x) },
	}
	names := []string{"odku", "update-lastid-nextval", "update-lastid-plus1", "select1"}
	tot := map[string]time.Duration{}
	cnt := map[string]int{}
	end := time.Now().Add(30 * time.Second)
	for b := 0; time.Now().Before(end); b++ {
		for i := range names {
			nm := names[(i+b)%len(names)]
			st := time.Now()
			for range 50 {
				if err := variants[nm](); err != nil {
					t.Fatal(nm, err)
				}
			}
			tot[nm] += time.Since(st)
			cnt[nm] += 50
		}
	}
	for _, nm := range names {
		t.Logf("%-24s %6d ops  mean %v", nm, cnt[nm], tot[nm]/time.Duration(cnt[nm]))
	}
}
