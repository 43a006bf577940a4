package mysqlstore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"example.com/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

// Server error numbers the store tells apart.
const (
	erSyntax        = 1064 // ER_PARSE_ERROR
	erLockWait      = 1205 // ER_LOCK_WAIT_TIMEOUT (also MariaDB's NOWAIT)
	erDeadlock      = 1213 // ER_LOCK_DEADLOCK
	erNoWait        = 3572 // ER_LOCK_NOWAIT (MySQL 8)
	erNoSuchTable   = 1146 // ER_NO_SUCH_TABLE
	erUnknownObject = 4091 // ER_UNKNOWN_SEQUENCES (MariaDB)
	erBadField      = 1054 // ER_BAD_FIELD_ERROR: a table older than the waiter mark
)

func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isSyntaxError(err error) bool { return errNumber(err) == erSyntax }

// missingSchema reports an error that means Migrate was not run (or not
// since the waiter mark's columns were added: an unknown column).
func missingSchema(err error) bool {
	n := errNumber(err)
	return n == erNoSuchTable || n == erUnknownObject || n == erBadField
}

// deniedPrivilege reports an error that a missing privilege causes:
// ER_DBACCESS_DENIED_ERROR (1044), ER_TABLEACCESS_DENIED_ERROR (1142: a
// command denied on a table or sequence), ER_COLUMNACCESS_DENIED_ERROR
// (1143) and ER_SPECIFIC_ACCESS_DENIED_ERROR (1227). Retrying cannot fix it.
func deniedPrivilege(err error) bool {
	switch errNumber(err) {
	case 1044, 1142, 1143, 1227:
		return true
	}
	return false
}

// wrap gives a server error its context; a missing schema matches
// driver.ErrRefused (run Migrate), and so does a missing privilege;
// everything else stays unclassified (driver.ErrUnavailable by default:
// the outcome is unknown).
func wrap(op string, err error) error {
	if missingSchema(err) {
		return fmt.Errorf("%w: mysqlstore: %s: schema missing or outdated (run mysqlstore.Migrate): %w", driver.ErrRefused, op, err)
	}
	if deniedPrivilege(err) {
		return fmt.Errorf("%w: mysqlstore: %s: the database user lacks a privilege on the lock tables: %w", driver.ErrRefused, op, err)
	}
	return fmt.Errorf("mysqlstore: %s: %w", op, err)
}

// digest is what the tables keep of a token: its SHA-256.
func digest(token string) []byte {
	d := sha256.Sum256([]byte(token))
	return d[:]
}

// checkArgs refuses an empty or oversized key, an empty token and a ttl
// below a millisecond, before any I/O.
func checkArgs(key, token string, ttl time.Duration, needTTL bool) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: mysqlstore: empty key", driver.ErrInvalid)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: mysqlstore: key of %d bytes (at most %d)", driver.ErrInvalid, len(key), MaxKeyBytes)
	case token == "":
		return fmt.Errorf("%w: mysqlstore: empty token", driver.ErrInvalid)
	case needTTL && ttl < time.Millisecond:
		return fmt.Errorf("%w: mysqlstore: ttl %v below 1ms", driver.ErrInvalid, ttl)
	}
	return nil
}
