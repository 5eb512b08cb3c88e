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
