package pgstore

import (
	"context"
	"errors"
	"strconv"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ driver.MetaKeeper = (*Store)(nil)

// KeepsMeta implements driver.MetaKeeper: the lease table's meta column
// keeps "<fence>:<metadata>", written by a second statement right after an
// Acquire that started a holding with metadata (none without it), and
// Inspect and List show it while the row's fence is its own: re-entries,
// extensions and partial releases keep it, a transfer drops it. On a table
// migrated before the column existed (run Migrate again) the metadata is
// not written and Inspect and List read the table as before: the lock
// works the same.
func (s *Store) KeepsMeta() bool { return true }

// setMeta records meta with the new holding of key with fence. Its failure
// is not the Acquire's: the key is held either way, and metadata only
// describes the holder (a table without the meta column, a connection
// lost after the grant).
func (s *Store) setMeta(ctx context.Context, key string, fence int64, meta string) {
	_, _ = s.db.exec(ctx, s.sql.setMeta, key, fence, strconv.FormatInt(fence, 10)+":"+meta)
}

// noMetaColumn reports an error of a statement that names the meta column
// on a table that lacks it (migrated before the column existed).
func noMetaColumn(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42703"
}
