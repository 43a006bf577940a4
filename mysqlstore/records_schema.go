package mysqlstore

import "context"

// recordsDDL: one row per idempotency record (scope, name: the record's
// key). owner is the SHA-256 of the executor's token, never the token;
// fence the execution's, from <p>_fence (the lease table's sequence, so a
// fence names one execution); done 0 while in flight (lease_ends: when
// another may take it over), 1 once completed (result kept); keep_us the
// retention; forget_at when the record counts as gone (the sweep deletes
// it then): lease_ends + retention in flight, completion + retention done;
// took 1 if the owner's execution took the record over (a resent begin of
// the owner answers it again). Times are on the database clock in UTC.
func (n names) recordsDDL() string {
	return "CREATE TABLE IF NOT EXISTS " + n.idem + ` (
  scope VARBINARY(1024) NOT NULL,
  name VARBINARY(1024) NOT NULL,
  owner BINARY(32) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  fingerprint VARBINARY(256) NOT NULL,
  done TINYINT(1) NOT NULL,
  lease_ends DATETIME(6) NOT NULL,
  keep_us BIGINT NOT NULL,
  forget_at DATETIME(6) NOT NULL,
  result MEDIUMBLOB NULL,
  took TINYINT(1) NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, name),
  KEY forget_at (forget_at)
) ENGINE=InnoDB`
}

// recordsTookDDL adds took to a records table created before it.
func (n names) recordsTookDDL() string {
	return "ALTER TABLE " + n.idem + " ADD COLUMN IF NOT EXISTS took TINYINT(1) NOT NULL DEFAULT 0"
}

// sweepRecords deletes up to sweepBatch forgotten records, by primary key
// after an unlocked read, re-checking forget_at under the row lock (a
// record begun again meanwhile stays). A schema without the records table
// has nothing to sweep.
func (s *Store) sweepRecords(ctx context.Context) (int, error) {
	I := s.n.idem
	return s.sweepByKey(ctx, "SELECT scope, name FROM "+I+" WHERE forget_at <= "+now+" LIMIT ?",
		"DELETE FROM "+I+" WHERE (scope, name) IN (%s) AND forget_at <= "+now, "(?, ?)", 2)
}
