-- A pipeline lock's token stays its public fence number (recorded with the work done under it,
-- in events and in messages); its holder proves itself with a secret that acquire_pipeline_lock
-- hands out once, of which only the SHA-256 is kept. The app role reads every lock row, so with
-- the token alone one host could settle, release or overwrite another holder's work.
ALTER TABLE mdame.system_locks ADD COLUMN secret_sha256 bytea
    CHECK (secret_sha256 IS NULL OR octet_length(secret_sha256) = 32);
-- The fences find a lock by its secret's hash.
CREATE UNIQUE INDEX system_locks_secret_sha256_key ON mdame.system_locks (secret_sha256);
-- A lock taken before has no secret: no fence accepts it, and the next acquire takes it over as
-- if it had expired.

-- Return types and parameters that change (the functions files define them again).
DROP FUNCTION IF EXISTS mdame.acquire_pipeline_lock(text, text, integer);
DROP FUNCTION IF EXISTS mdame._fence(bigint, bigint);
DROP FUNCTION IF EXISTS mdame._fence_token(bigint);
DROP FUNCTION IF EXISTS mdame._lock_lost(text, text, bigint);

-- A job's lease the same way: the app role reads every job's worker id and attempt, so those
-- alone let any host complete, fail or renew another worker's job. A claim hands its worker a
-- secret, kept as its SHA-256 while the lease (or the succeeded job) is that worker's.
ALTER TABLE mdame.jobs ADD COLUMN lease_secret_sha256 bytea
    CHECK (lease_secret_sha256 IS NULL OR octet_length(lease_secret_sha256) = 32);
DROP FUNCTION IF EXISTS mdame.claim_job(text, text, integer, text);
DROP FUNCTION IF EXISTS mdame.claim_scene_job(text, text, integer);
DROP FUNCTION IF EXISTS mdame.heartbeat_job(bigint, text, integer, integer);
DROP FUNCTION IF EXISTS mdame.complete_job(bigint, text, integer, jsonb);
DROP FUNCTION IF EXISTS mdame.fail_job(bigint, text, integer, text, boolean, integer);
DROP FUNCTION IF EXISTS mdame.complete_scene_job(bigint, text, integer, text, text, boolean, integer);
DROP FUNCTION IF EXISTS mdame.invalidate_scene_cache(text, text, text, bigint, text, integer);

-- An alert's delivery claim token is a bearer too: only the claimer is told it (the claim's
-- answer), as an upload session's URI. The app role reads every other column.
REVOKE SELECT ON TABLE mdame.alerts FROM mdame_app;
GRANT SELECT (id, dimension_slug, cause, day, text, occurrences, attempts, last_error,
              claimed_until, delivered_at, created_at, last_seen_at)
    ON TABLE mdame.alerts TO mdame_app;
