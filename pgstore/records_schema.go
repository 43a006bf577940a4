package pgstore

// recordsTemplate is the idempotency records' schema: %[1]s the records
// table, %[2]s the fence sequence (the lease table's: fences of locks,
// permits and executions rise together, so a fence names one execution of
// one record), %[3]s the begin function, %[4]s the folded begin's.
//
// Why a function: a begin reads the record and decides (start, take over,
// replay, refuse) under the record's row lock, and a missing record must
// be inserted by exactly one of concurrent begins; in a VOLATILE PL/pgSQL
// function under READ COMMITTED each statement takes a new snapshot, so
// the SELECT ... FOR UPDATE after a lost INSERT race sees the winner's
// row. One statement for the caller (one round trip), one transaction.
//
// The folded begin (%[4]s, BeginRecordTx) runs in the caller's
// transaction, which then holds the record, uncommitted, until it ends: a
// transaction-scoped advisory lock on the record, tried without waiting,
// tells a concurrent folded begin at once that the record is in flight
// (a wait for the row lock, or for the uncommitted INSERT of the same key,
// would last the whole business transaction). It sets the transaction's
// idle_in_transaction_session_timeout to the lease (set_config, local):
// a transaction left idle longer, its executor paused, is ended by the
// server, rolled back, and the key is free.
//
// Times are statement_timestamp(): the start of the client's statement on
// the database clock (within the caller's transaction for the in-
// transaction completion, whose transaction may have begun long before).
const recordsTemplate = `
-- Idempotency records: one row per (scope, key). owner is the hex SHA-256
-- of the executor's token, never the token; fence the execution's, from
-- the fence sequence; done false while in flight (lease_ends: when another
-- may take it over), true once completed (result kept). keep_us is the
-- retention; forget_at when the record counts as gone (the sweep deletes
-- it then): lease_ends + retention in flight, completion + retention done.
CREATE TABLE IF NOT EXISTS %[1]s (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    owner       text        NOT NULL,
    fence       bigint      NOT NULL CHECK (fence > 0),
    fingerprint bytea       NOT NULL,
    done        boolean     NOT NULL,
    lease_ends  timestamptz NOT NULL,
    keep_us     bigint      NOT NULL CHECK (keep_us > 0),
    forget_at   timestamptz NOT NULL,
    result      bytea,
    took        boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (scope, key)
);
-- took: the owner's execution took the record over (a resent begin of the
-- owner answers it again). Added to tables created before it (a
-- metadata-only change).
ALTER TABLE %[1]s ADD COLUMN IF NOT EXISTS took boolean NOT NULL DEFAULT false;

-- BeginRecord: o_status 1 started (o_took: a takeover, also when the
-- owner's begin is resent), 2 in flight, 3
-- completed (o_result), -1 another fingerprint (o_took: the record is
-- completed). o_remaining_us: the lease left (1, 2) or the retention left
-- (3).
CREATE OR REPLACE FUNCTION %[3]s(p_scope text, p_key text, p_owner text, p_fp bytea, p_lease_us bigint, p_keep_us bigint,
    OUT o_status integer, OUT o_fence bigint, OUT o_remaining_us bigint, OUT o_took boolean, OUT o_result bytea)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    r %[1]s%%ROWTYPE;
    t timestamptz := statement_timestamp();
    lease interval := p_lease_us * interval '1 microsecond';
BEGIN
    o_took := false; o_remaining_us := p_lease_us;
    FOR attempt IN 1..3 LOOP
        SELECT * INTO r FROM %[1]s AS i WHERE i.scope = p_scope AND i.key = p_key FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO %[1]s (scope, key, owner, fence, fingerprint, done, lease_ends, keep_us, forget_at)
            VALUES (p_scope, p_key, p_owner, nextval('%[2]s'), p_fp, false, t + lease, p_keep_us,
                    t + lease + p_keep_us * interval '1 microsecond')
            ON CONFLICT DO NOTHING RETURNING fence INTO o_fence;
        IF FOUND THEN
            o_status := 1;
            RETURN;
        END IF;
    END LOOP;
    IF r.scope IS NULL THEN
        RAISE EXCEPTION 'dlock record (%%, %%) inserted and deleted three times over', p_scope, p_key;
    END IF;
    IF r.forget_at <= t THEN -- forgotten: a fresh record
        UPDATE %[1]s AS i SET owner = p_owner, fence = nextval('%[2]s'), fingerprint = p_fp, done = false,
            lease_ends = t + lease, keep_us = p_keep_us, forget_at = t + lease + p_keep_us * interval '1 microsecond', result = NULL, took = false
            WHERE i.scope = p_scope AND i.key = p_key RETURNING i.fence INTO o_fence;
        o_status := 1;
        RETURN;
    END IF;
` + recordAnswer + `    ELSIF r.owner = p_owner THEN -- a resent begin: the same execution
        UPDATE %[1]s AS i SET lease_ends = greatest(i.lease_ends, t + lease),
            forget_at = greatest(i.forget_at, greatest(i.lease_ends, t + lease) + i.keep_us * interval '1 microsecond')
            WHERE i.scope = p_scope AND i.key = p_key;
        o_status := 1; o_took := r.took;
        o_remaining_us := (extract(epoch FROM greatest(r.lease_ends, t + lease) - t) * 1000000)::bigint;
    ELSIF r.lease_ends > t THEN
        o_status := 2; o_remaining_us := (extract(epoch FROM r.lease_ends - t) * 1000000)::bigint;
    ELSE -- the executor's lease passed: take over with a greater fence
        UPDATE %[1]s AS i SET owner = p_owner, fence = nextval('%[2]s'), lease_ends = t + lease, keep_us = p_keep_us, took = true,
            forget_at = t + lease + p_keep_us * interval '1 microsecond'
            WHERE i.scope = p_scope AND i.key = p_key RETURNING i.fence INTO o_fence;
        o_status := 1; o_took := true;
    END IF;
END
$fn$;

-- BeginRecordTx (the folded begin): the begin function's answers, in the
-- caller's transaction, after the record's advisory lock. If an uncommitted
-- execution holds that lock: 2 in flight (o_remaining_us: the committed
-- record's lease left, or -1), or from the committed record 3 completed or
-- -1 another fingerprint, without waiting.
CREATE OR REPLACE FUNCTION %[4]s(p_scope text, p_key text, p_owner text, p_fp bytea, p_lease_us bigint, p_keep_us bigint,
    OUT o_status integer, OUT o_fence bigint, OUT o_remaining_us bigint, OUT o_took boolean, OUT o_result bytea)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    r %[1]s%%ROWTYPE;
    t timestamptz := statement_timestamp();
BEGIN
    IF pg_try_advisory_xact_lock(hashtext('%[1]s'), hashtext(length(p_scope) || ':' || p_scope || ':' || p_key)) THEN
        PERFORM set_config('idle_in_transaction_session_timeout', least(ceil(p_lease_us / 1000.0), 2147483647)::bigint::text, true);
        SELECT * INTO o_status, o_fence, o_remaining_us, o_took, o_result FROM %[3]s(p_scope, p_key, p_owner, p_fp, p_lease_us, p_keep_us);
        RETURN;
    END IF;
    o_status := 2; o_fence := 0; o_remaining_us := -1; o_took := false;
    SELECT * INTO r FROM %[1]s AS i WHERE i.scope = p_scope AND i.key = p_key AND i.forget_at > t;
    IF NOT FOUND THEN
        RETURN;
    END IF;
` + recordAnswer + `    ELSIF r.lease_ends > t THEN
        o_remaining_us := (extract(epoch FROM r.lease_ends - t) * 1000000)::bigint;
    END IF;
END
$fn$;
`

// recordAnswer is the begin functions' answer from a live record r read at
// t: another fingerprint, or the completed result; each function goes on
// with its ELSIF branches for a record in flight.
const recordAnswer = `    o_fence := r.fence;
    IF r.fingerprint <> p_fp THEN
        o_status := -1; o_took := r.done;
    ELSIF r.done THEN
        o_status := 3; o_result := r.result;
        o_remaining_us := (extract(epoch FROM r.forget_at - t) * 1000000)::bigint;
`
