package main

import (
	"errors"
	"regexp"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// schemaFix is what a CLI user runs when an SQL store's tables are
// missing. URL stands for the store URL: the real one may hold a password.
const schemaFix = "dlock schema --store URL --apply"

// missingSchema reports whether err is an SQL store's missing table,
// sequence or column: the schema was never applied, or predates a column.
// PostgreSQL: SQLSTATE 42P01 (undefined table), 42703 (undefined column);
// MariaDB/MySQL: 1146 (no such table), 4091 (unknown sequence), 1054
// (unknown column).
func missingSchema(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" || pe.Code == "42703"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1146 || me.Number == 4091 || me.Number == 1054
	}
	return false
}

// goHint matches the SQL stores' hints for Go callers: "(run
// pgstore.Migrate, or `dlock schema` for the DDL)", "(run
// mysqlstore.Migrate)", "(run Migrate?)" and their variants.
var goHint = regexp.MustCompile(`\s*\(([^()]*?: )?run (pgstore\.|mysqlstore\.)?Migrate[^()]*\)`)

// cliHints is s with the SQL stores' hints for Go callers removed; the CLI
// gives its own (schemaFix).
func cliHints(s string) string { return goHint.ReplaceAllString(s, "") }
