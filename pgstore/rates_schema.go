package pgstore

// ratesTemplate is the RateLimiter's schema: %[1]s the rates table, %[2]s
// its decision function.
//
// Why a function: the decision is one INSERT ... ON CONFLICT DO UPDATE
// whose WHERE is the admission test, so a denied call writes nothing. But
// then RETURNING gives no row, and the denial's answer needs the TAT that
// decided it: a read in the same statement sees the statement's snapshot,
// older than the row version the conflict locked if another call
// committed meanwhile. In a VOLATILE PL/pgSQL function the read is a
// statement of its own, with a new snapshot under READ COMMITTED, and it
// reads the row the INSERT left locked (ON CONFLICT DO UPDATE locks the
// row even when its WHERE fails): the very TAT that denied the call.
// Under REPEATABLE READ the INSERT fails (40001) if that row is newer
// than the snapshot, so the read cannot be stale either. One statement
// for the caller (one round trip), one transaction.
const ratesTemplate = `
-- Rate limiter keys: one row per key whose TAT (theoretical arrival
-- time, GCRA) is ahead of the clock or lately passed; the sweep deletes
-- passed ones. tat is in microseconds since the Unix epoch on the
-- database clock (now() of the statement that set it).
CREATE TABLE IF NOT EXISTS %[1]s (
    name text   PRIMARY KEY,
    tat  bigint NOT NULL
);

-- AllowN: admits p_n of key p_name's budget (interval p_iv µs, burst
-- p_burst) if all fit, moving its TAT on by p_n intervals; a denied call
-- writes nothing. Returns whether admitted, the key's TAT after the call
-- and the now (µs) it was decided at.
CREATE OR REPLACE FUNCTION %[2]s(p_name text, p_iv bigint, p_burst integer, p_n integer,
    OUT o_allowed boolean, OUT o_tat bigint, OUT o_now bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    IF p_iv < 1 OR p_n < 1 OR p_n > p_burst THEN
        RAISE EXCEPTION 'dlock rates: invalid interval %%, n %%, burst %%', p_iv, p_n, p_burst
            USING ERRCODE = '22023';
    END IF;
    o_now := (extract(epoch FROM now()) * 1000000)::bigint;
    INSERT INTO %[1]s AS r (name, tat) VALUES (p_name, o_now + p_n * p_iv)
        ON CONFLICT (name) DO UPDATE SET tat = greatest(r.tat, o_now) + p_n * p_iv
        WHERE greatest(r.tat, o_now) + (p_n - p_burst) * p_iv <= o_now
        RETURNING r.tat INTO o_tat;
    o_allowed := FOUND;
    IF NOT o_allowed THEN
        SELECT r.tat INTO o_tat FROM %[1]s AS r WHERE r.name = p_name;
    END IF;
END
$fn$;
`
