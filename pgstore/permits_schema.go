package pgstore

// permitsTemplate is the Semaphore's schema: %[1]s the permits table (also
// the name hashed into the per-key advisory lock), %[2]s the fence
// sequence (the lease table's: fences of locks and permits rise
// together), %[3]s the acquisition function.
//
// Why a function: counting the live permits of a key and adding a holding
// must see every holding committed before it, but a single statement
// reads one snapshot, taken before it could wait for a lock, so two
// acquirers waiting on each other would both count without the other's
// holding. In a VOLATILE PL/pgSQL function under READ COMMITTED each
// statement takes a new snapshot: the function takes a transaction-scoped
// advisory lock on (hash of the table, hash of the key), which serializes
// the key's acquirers until commit, then counts what is committed. One
// statement for the caller (one round trip), one transaction.
//
// Expired holdings are deleted (not merely skipped) before the count: the
// DELETE waits for the row lock of an ExtendPermits in flight and
// re-checks the expiry on the row it commits, so a holding that was being
// extended is counted, never taken for expired while its extension lands.
const permitsTemplate = `
-- Semaphore holdings: one row per holding of permits, live or lately
-- expired (a release deletes its row; acquisitions and the sweep delete
-- expired ones). owner is the hex SHA-256 of the holder's token; lim the
-- key's limit, the same on every live row of the key (stored by the
-- acquisition that found none out); expires_at on the database clock.
CREATE TABLE IF NOT EXISTS %[1]s (
    name       text        NOT NULL,
    owner      text        NOT NULL,
    permits    integer     NOT NULL CHECK (permits > 0),
    lim        integer     NOT NULL CHECK (lim >= permits),
    fence      bigint      NOT NULL CHECK (fence > 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, owner)
);

-- AcquirePermits: status 1 granted (or the owner's holding re-entered:
-- its fence, the later expiry), 0 too few free (used, the limit, µs until
-- the earliest expiry), -1 another limit is stored (in o_lim), -2 the
-- owner holds another number of permits (in o_used). Serialized per key by
-- a transaction-scoped advisory lock; needs READ COMMITTED (a fresh
-- snapshot per statement), refused otherwise.
CREATE OR REPLACE FUNCTION %[3]s(p_name text, p_owner text, p_n integer, p_k integer, p_ttl_us bigint,
    OUT o_status integer, OUT o_fence bigint, OUT o_used integer, OUT o_lim integer, OUT o_remaining_us bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    held integer;
    held_fence bigint;
    first timestamptz;
BEGIN
    o_status := 0; o_fence := 0; o_used := 0; o_lim := p_n; o_remaining_us := -1;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'dlock permits need READ COMMITTED, not %%', current_setting('transaction_isolation')
            USING ERRCODE = '0A000';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('%[1]s'), hashtext(p_name));
    DELETE FROM %[1]s AS p WHERE p.name = p_name AND p.expires_at <= now();
    SELECT coalesce(max(p.lim), p_n), coalesce(sum(p.permits), 0), min(p.expires_at)
        INTO o_lim, o_used, first FROM %[1]s AS p WHERE p.name = p_name;
    IF o_used > 0 AND o_lim <> p_n THEN
        o_status := -1;
        RETURN;
    END IF;
    SELECT p.permits, p.fence INTO held, held_fence FROM %[1]s AS p WHERE p.name = p_name AND p.owner = p_owner;
    IF FOUND THEN
        IF held <> p_k THEN
            o_status := -2; o_used := held;
            RETURN;
        END IF;
        UPDATE %[1]s AS p SET expires_at = greatest(p.expires_at, now() + p_ttl_us * interval '1 microsecond')
            WHERE p.name = p_name AND p.owner = p_owner;
        o_status := 1; o_fence := held_fence;
        RETURN;
    END IF;
    IF o_used + p_k > p_n THEN
        o_remaining_us := (extract(epoch FROM first - now()) * 1000000)::bigint;
        RETURN;
    END IF;
    INSERT INTO %[1]s AS p (name, owner, permits, lim, fence, expires_at)
        VALUES (p_name, p_owner, p_k, p_n, nextval('%[2]s'), now() + p_ttl_us * interval '1 microsecond')
        RETURNING p.fence INTO o_fence;
    o_status := 1; o_used := o_used + p_k;
END
$fn$;
`
