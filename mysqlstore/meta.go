package mysqlstore

import (
	"context"
	"strconv"

	"example.com/dlock/driver"
)

var _ driver.MetaKeeper = (*Store)(nil)

// metaExpr is the holding's metadata: meta's bytes after "<fence>:" when
// they start with the row's fence (a later holding's row keeps an earlier
// one's meta until it writes its own), else the empty string.
const metaExpr = "CASE WHEN LEFT(meta, LENGTH(fence) + 1) = CONCAT(fence, ':') THEN SUBSTRING(meta, LENGTH(fence) + 2) ELSE '' END"

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
func (s *Store) setMeta(ctx context.Context, key string, fence uint64, meta string) {
	_, _ = s.db.ExecContext(ctx, "UPDATE "+s.n.locks+" SET meta = ? WHERE name = ? AND fence = ? AND expires_at > "+now,
		[]byte(strconv.FormatUint(fence, 10)+":"+meta), []byte(key), fence)
}
