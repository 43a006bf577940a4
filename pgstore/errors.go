package pgstore

import (
	"errors"
	"fmt"
	"strings"

	"example.com/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrStatementPooling means that a pooler in statement mode (PgBouncer with
// pool_mode = statement) is in front: it refuses every transaction block
// (BEGIN), closing the client connection that opened one, and gives the
// server session back after each statement. WithRowLock and WithRowLockDB
// fail with it at once, before fn runs (the row lock needs a transaction);
// a session store's lock (NewSession) fails with an error matching both it
// and ErrSharedSession. It matches driver.ErrRefused: retrying cannot fix
// it. Nothing was locked or written. The lease table (New, NewDB) works
// through statement pooling: each of its calls is one statement.
var ErrStatementPooling = fmt.Errorf("%w: pgstore: a pooler in statement mode (PgBouncer pool_mode = statement) refuses transactions and shares server sessions: "+
	"the row lock and session locks cannot work through it, the lease table (New) can", driver.ErrRefused)

// statementPooling reports whether err is PgBouncer's refusal of a
// transaction block in statement mode (SQLSTATE 08P01, FATAL: the pooler
// closed the client connection).
func statementPooling(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "statement pooling mode")
}

// wrap adds the operation to err and classifies PostgreSQL's refusals,
// which retrying cannot fix, as driver.ErrRefused: a missing table (run
// Migrate), a missing column (a table made before the column: run Migrate
// again), a read-only server (a replica, or default_transaction_read_only),
// missing privileges, failed authentication, a prepared statement that a
// pooler in transaction or statement mode lost or shares (the Bind failed:
// nothing ran), a feature the call needs and the session lacks (the
// Semaphore under REPEATABLE READ).
// Anything else (network errors,
// a cancelled context, a server shutting down) matches no sentinel: the
// outcome is unknown.
func wrap(op string, err error) error {
	err = oneAttempt(err)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && refused(pe.Code) {
		hint := ""
		switch pe.Code {
		case "42P01":
			hint = " (run pgstore.Migrate, or `dlock schema` for the DDL)"
		case "42883":
			hint = " (a function of a newer pgstore: run pgstore.Migrate again, or `dlock schema` for the DDL)"
		case "42703":
			hint = " (a table made by an older pgstore: run pgstore.Migrate again, or `dlock schema` for the DDL)"
		case "25006":
			hint = " (a read-only server: a replica? point the store at the primary)"
		case "0A000":
			hint = " (the store needs READ COMMITTED: check default_transaction_isolation)"
		case "26000", "42P05":
			hint = " (a pooler in transaction or statement mode, PgBouncer, ran the pool's prepared statement on another server connection: set default_query_exec_mode=exec in the pool's URL, see docs/postgres.md)"
		}
		return fmt.Errorf("%w: pgstore: %s: %w%s", driver.ErrRefused, op, err, hint)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// oneAttempt shows a failed connection (pgconn.ConnectError) on one line:
// pgx lists every attempt on lines of their own, indented with tabs, the
// refused TLS attempt of sslmode=prefer (pgx's default) first. When the
// server answered with an error (a wrong password, no such database), the
// server's reason alone is shown; otherwise the attempts, separated by
// "; ". The result still unwraps to err.
func oneAttempt(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "\n") {
		return err
	}
	msg := fmt.Sprintf("failed to connect to `user=%s database=%s`: ", ce.Config.User, ce.Config.Database)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
		msg += pe.Error()
	} else {
		msg += strings.ReplaceAll(strings.TrimSpace(ce.Unwrap().Error()), "\n", "; ")
	}
	return &connectError{msg: msg, err: err}
}

// connectError is oneAttempt's error.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// refused reports whether a SQLSTATE is one retrying cannot fix.
func refused(code string) bool {
	switch {
	case code == "42P01", // undefined_table
		code == "42703",               // undefined_column
		code == "42501",               // insufficient_privilege
		code == "25006",               // read_only_sql_transaction
		code == "42883",               // undefined_function
		code == "26000",               // invalid_sql_statement_name: a prepared statement missing (a pooler)
		code == "42P05",               // duplicate_prepared_statement: another client's (a pooler)
		code == "0A000",               // feature_not_supported: permits under REPEATABLE READ
		strings.HasPrefix(code, "28"), // invalid authorization
		strings.HasPrefix(code, "3D"), // invalid catalog name (no such database)
		strings.HasPrefix(code, "22"): // data exception (a value out of range)
		return true
	}
	return false
}
