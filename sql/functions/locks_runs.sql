-- Pipeline locks and runs: the fencing token a partition's writer holds, and its run record.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Returns the lock's new token, strictly greater than any token handed out before (the public
-- fence number its work records), and its secret: the holder's proof in every fenced call,
-- handed out here once (only its SHA-256 is kept). No row while a live holder has the lock. A
-- released or expired lock is taken over, and so is one taken before locks had secrets.
CREATE OR REPLACE FUNCTION mdame.acquire_pipeline_lock(p_lock_name text, p_holder text, p_ttl_seconds integer)
 RETURNS TABLE(token bigint, secret bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_ttl interval := mdame._seconds('ttl_seconds', p_ttl_seconds);
  v_secret bigint := mdame._new_secret();
  v_token bigint;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200);
  INSERT INTO system_locks AS l
    (lock_name, holder, token, secret_sha256, ttl_seconds, acquired_at, heartbeat_at, expires_at)
  VALUES (p_lock_name, p_holder, nextval('lock_tokens'), mdame._lock_secret_sha256(v_secret),
          p_ttl_seconds, now(), now(), now() + v_ttl)
  ON CONFLICT (lock_name) DO UPDATE
    SET holder = excluded.holder, token = excluded.token, secret_sha256 = excluded.secret_sha256,
        ttl_seconds = excluded.ttl_seconds, acquired_at = excluded.acquired_at,
        heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at, released_at = NULL
    WHERE l.released_at IS NOT NULL OR l.expires_at <= now() OR l.secret_sha256 IS NULL
  RETURNING l.token INTO v_token;
  IF v_token IS NULL THEN
    RETURN;
  END IF;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('lock', v_token, 'acquired', jsonb_build_object('lock_name', p_lock_name, 'holder', p_holder));
  RETURN QUERY SELECT v_token, v_secret;
END
$function$;
REVOKE ALL ON FUNCTION mdame.acquire_pipeline_lock(p_lock_name text, p_holder text, p_ttl_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.acquire_pipeline_lock(p_lock_name text, p_holder text, p_ttl_seconds integer) TO mdame_app;

-- Raises MD004 saying why (p_holder, the secret) does not hold the lock; names tokens only.
CREATE OR REPLACE FUNCTION mdame._lock_lost(p_lock_name text, p_holder text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
  v_lock mdame.system_locks;
BEGIN
  SELECT * INTO v_lock FROM mdame.system_locks WHERE lock_name = p_lock_name;
  IF v_lock.lock_name IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: lock %s has never been acquired', mdame._clip(p_lock_name));
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: lock %s is not held by %s with this secret (last holder %s, token %s%s)',
                     mdame._clip(p_lock_name), mdame._clip(p_holder),
                     mdame._clip(v_lock.holder), v_lock.token,
                     CASE WHEN v_lock.released_at IS NOT NULL THEN ', released' ELSE '' END);
END
$function$;
REVOKE ALL ON FUNCTION mdame._lock_lost(p_lock_name text, p_holder text) FROM PUBLIC, mdame_app, mdame_admin;

-- The lock's heartbeat also extends the leases of the attempts its holder has in flight.
-- p_token is the holder's secret.
CREATE OR REPLACE FUNCTION mdame.heartbeat_pipeline_lock(p_lock_name text, p_holder text, p_token bigint, p_ttl_seconds integer DEFAULT NULL::integer)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_expires timestamptz;
  v_token bigint;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200),
          mdame._require_not_null('token', p_token);
  IF p_ttl_seconds IS NOT NULL THEN
    PERFORM mdame._seconds('ttl_seconds', p_ttl_seconds);
  END IF;
  UPDATE system_locks
     SET heartbeat_at = now(),
         ttl_seconds = coalesce(p_ttl_seconds, ttl_seconds),
         expires_at = now() + coalesce(p_ttl_seconds, ttl_seconds) * interval '1 second'
   WHERE lock_name = p_lock_name AND holder = p_holder
     AND secret_sha256 = mdame._lock_secret_sha256(p_token) AND released_at IS NULL
  RETURNING expires_at, token INTO v_expires, v_token;
  IF v_expires IS NULL THEN
    PERFORM mdame._lock_lost(p_lock_name, p_holder);
  END IF;
  UPDATE provider_attempts
     SET lease_expires_at = v_expires + lease_grace_seconds * interval '1 second'
   WHERE lock_token = v_token AND status = 'submitted';
  RETURN v_expires;
END
$function$;
REVOKE ALL ON FUNCTION mdame.heartbeat_pipeline_lock(p_lock_name text, p_holder text, p_token bigint, p_ttl_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.heartbeat_pipeline_lock(p_lock_name text, p_holder text, p_token bigint, p_ttl_seconds integer) TO mdame_app;

-- Frees the lock. true: released now; false: this holder had already released it (a retry);
-- another secret raises MD004. p_token is the holder's secret.
CREATE OR REPLACE FUNCTION mdame.release_pipeline_lock(p_lock_name text, p_holder text, p_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_lock system_locks;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200),
          mdame._require_not_null('token', p_token);
  SELECT * INTO v_lock FROM system_locks
   WHERE lock_name = p_lock_name AND holder = p_holder
     AND secret_sha256 = mdame._lock_secret_sha256(p_token)
   FOR UPDATE;
  IF v_lock.lock_name IS NULL THEN
    PERFORM mdame._lock_lost(p_lock_name, p_holder);
  ELSIF v_lock.released_at IS NOT NULL THEN
    RETURN false;
  END IF;
  UPDATE system_locks SET released_at = now() WHERE lock_name = p_lock_name;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('lock', v_lock.token, 'released', jsonb_build_object('lock_name', p_lock_name, 'holder', p_holder));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_pipeline_lock(p_lock_name text, p_holder text, p_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_pipeline_lock(p_lock_name text, p_holder text, p_token bigint) TO mdame_app;

-- The operator's release of a lock whose holder is known dead (the liveness sweep found its run
-- ended): by the public token, so only this holding is released, never a later one. The app role
-- may not: it reads every token, and the database cannot tell a dead holder from a live one.
-- true: released now; false: already released, expired or taken over.
CREATE OR REPLACE FUNCTION mdame.release_dead_pipeline_lock(p_lock_name text, p_holder text, p_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_lock system_locks;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200),
          mdame._require_not_null('token', p_token);
  UPDATE system_locks SET released_at = now()
   WHERE lock_name = p_lock_name AND holder = p_holder AND token = p_token
     AND released_at IS NULL AND expires_at > now()
  RETURNING * INTO v_lock;
  IF v_lock.lock_name IS NULL THEN
    RETURN false;
  END IF;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('lock', p_token, 'released',
          jsonb_build_object('lock_name', p_lock_name, 'holder', p_holder, 'dead_holder', true));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_dead_pipeline_lock(p_lock_name text, p_holder text, p_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_dead_pipeline_lock(p_lock_name text, p_holder text, p_token bigint) TO mdame_admin;

-- Records the start of a run. Idempotent per execution_id. A lock token (the holder's secret),
-- when given, must be a live one: a run must not start under a lock it no longer holds. The run
-- records the lock's public token.
CREATE OR REPLACE FUNCTION mdame.start_pipeline_run(p_execution_id uuid, p_dimension_slug text, p_partition_key text, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dimension bigint;
  v_run pipeline_runs;
  v_token bigint;
BEGIN
  PERFORM mdame._require_not_null('execution_id', p_execution_id),
          mdame._require_text('partition_key', p_partition_key, 200);
  IF p_dimension_slug IS NOT NULL THEN
    v_dimension := mdame._dimension_id(p_dimension_slug);
  END IF;
  IF p_lock_token IS NOT NULL THEN
    SELECT token INTO v_token FROM system_locks
     WHERE secret_sha256 = mdame._lock_secret_sha256(p_lock_token) AND released_at IS NULL
       AND expires_at > now();
    IF v_token IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'MD004',
        MESSAGE = format('mdame: lock token %s is not a live lock token',
                         coalesce(mdame._secret_token(p_lock_token)::text, 'of no current lock'));
    END IF;
  END IF;
  INSERT INTO pipeline_runs (execution_id, dimension_id, partition_key, lock_token)
  VALUES (p_execution_id, v_dimension, p_partition_key, v_token)
  ON CONFLICT (execution_id) DO NOTHING
  RETURNING * INTO v_run;
  IF v_run.id IS NULL THEN
    SELECT * INTO v_run FROM pipeline_runs WHERE execution_id = p_execution_id;
    IF (v_run.dimension_id, v_run.partition_key) IS DISTINCT FROM (v_dimension, p_partition_key) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: run %s already exists for another dimension or partition',
                         p_execution_id);
    END IF;
    RETURN v_run.id;
  END IF;
  INSERT INTO events (subject_kind, subject_id, event, to_state, detail)
  VALUES ('pipeline_run', v_run.id, 'started', 'running',
          jsonb_build_object('execution_id', p_execution_id, 'partition_key', p_partition_key,
                             'lock_token', v_token));
  RETURN v_run.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.start_pipeline_run(p_execution_id uuid, p_dimension_slug text, p_partition_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.start_pipeline_run(p_execution_id uuid, p_dimension_slug text, p_partition_key text, p_lock_token bigint) TO mdame_app;

-- Finishes a running run. true: finished now; false: already finished with this status.
-- Written after the run ended, by whoever saw it end (the run status sensors, an in-process
-- run's caller, the liveness sweep), none of which holds a lock any more: so it is not fenced,
-- and instead a failure or cancellation replaces a recorded success (never the reverse). A
-- success recorded early or falsely cannot hide the failure the run's own end reports, and the
-- worst a false failure does is make the partition's next run look again.
CREATE OR REPLACE FUNCTION mdame.finish_pipeline_run(p_execution_id uuid, p_status text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_run pipeline_runs;
BEGIN
  PERFORM mdame._require_not_null('execution_id', p_execution_id),
          mdame._require_one_of('status', p_status, ARRAY['succeeded', 'failed', 'cancelled']),
          mdame._require_json('detail', p_detail);
  SELECT * INTO v_run FROM pipeline_runs WHERE execution_id = p_execution_id FOR UPDATE;
  IF v_run.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: pipeline run %s does not exist', p_execution_id);
  ELSIF v_run.status = p_status THEN
    RETURN false;
  ELSIF v_run.status <> 'running' AND NOT (v_run.status = 'succeeded' AND p_status <> 'succeeded') THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: pipeline run %s already finished as %s', p_execution_id, v_run.status);
  END IF;
  UPDATE pipeline_runs
     SET status = p_status, detail = detail || p_detail, finished_at = now()
   WHERE id = v_run.id;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('pipeline_run', v_run.id, 'finished', v_run.status, p_status, p_detail);
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.finish_pipeline_run(p_execution_id uuid, p_status text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.finish_pipeline_run(p_execution_id uuid, p_status text, p_detail jsonb) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.dimension_lock_name(p_slug text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  -- The Python side (mdame_pipeline.locks.dimension_lock_name) builds the same name.
  SELECT 'pipeline:' || p_slug
$function$;
REVOKE ALL ON FUNCTION mdame.dimension_lock_name(p_slug text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.dimension_lock_name(p_slug text) TO mdame_app;

-- Of p_slugs, in their order, the dimensions whose partition of p_day a run would still find
-- work in: `mdame demo` runs only these and reports the others from what the database holds.
-- A partition is finished when all of these hold:
-- - its latest run is a publishing_job that succeeded (finish_pipeline_run's detail names the
--   job): the whole graph ran after anything earlier, and no later run failed or is running;
-- - none of its topics and scripts, nor their publications, is in a non-terminal state, and no
--   job of it is queued or running. A published script's scenes, voice track and render stay in
--   non-terminal states (ready, approved) for good, so they are judged by their script;
-- - the recovery pass at the start of its next run would do nothing: that pass looks at every
--   day's stalled scripts of the dimension (so a non-terminal script of any day counts), settles
--   the dimension's unsettled provider attempts (paid calls name the dimension; an upload's is
--   keyed by its publication) and returns every expired job lease, whichever partition's;
-- - the niche's registry row has not changed since that run, nor has it gained an account (a
--   higher videos_per_day, a new channel: a run would make or publish more). An account's
--   updated_at moves on every sync, so only its creation counts.
-- An unknown slug is unfinished: its run reports the error.
CREATE OR REPLACE FUNCTION mdame.unfinished_partitions(p_day date, p_slugs text[])
 RETURNS text[]
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_lease_expired boolean;
BEGIN
  PERFORM mdame._require_not_null('day', p_day),
          mdame._require_not_null('slugs', p_slugs);
  IF array_position(p_slugs, NULL) IS NOT NULL THEN
    PERFORM mdame._invalid('slugs must not contain NULL');
  END IF;
  v_lease_expired := EXISTS (SELECT FROM jobs WHERE state = 'running' AND lease_expires_at < now());
  RETURN coalesce((
    WITH asked AS (
      SELECT s.slug, s.n, d.id AS dimension_id, d.updated_at AS registered_at,
             to_char(p_day, 'YYYY-MM-DD') || '|' || s.slug AS partition_key
        FROM unnest(p_slugs) WITH ORDINALITY AS s(slug, n)
        LEFT JOIN dimensions d ON d.slug = s.slug
    ), open_jobs AS MATERIALIZED (
      SELECT DISTINCT partition_key FROM jobs WHERE finished_at IS NULL
    ), unsettled AS MATERIALIZED (
      -- The outcomes nobody knows yet (mdame_pipeline.recovery.UNSETTLED).
      SELECT DISTINCT coalesce(a.detail ->> 'dimension', dm.slug) AS slug
        FROM provider_attempts a
        LEFT JOIN publications p ON p.idempotency_key = a.work_key
        LEFT JOIN scripts sc ON sc.id = p.script_id
        LEFT JOIN dimensions dm ON dm.id = sc.dimension_id
       WHERE a.status IN ('submitted', 'unknown')
    )
    SELECT array_agg(a.slug ORDER BY a.n)
      FROM asked a
      LEFT JOIN LATERAL (
        SELECT r.status, r.detail ->> 'job' AS job, r.started_at
          FROM pipeline_runs r
         WHERE r.dimension_id = a.dimension_id AND r.partition_key = a.partition_key
         ORDER BY r.started_at DESC, r.id DESC LIMIT 1
      ) last ON true
     WHERE v_lease_expired
        OR a.dimension_id IS NULL
        OR last.status IS DISTINCT FROM 'succeeded'
        OR last.job IS DISTINCT FROM 'publishing_job'
        OR a.registered_at > last.started_at
        OR EXISTS (SELECT FROM dimension_accounts da
                    WHERE da.dimension_id = a.dimension_id AND da.created_at > last.started_at)
        OR EXISTS (SELECT FROM topics t JOIN work_states w ON (w.kind, w.state) = (t.kind, t.state)
                    WHERE t.dimension_id = a.dimension_id AND t.partition_date = p_day
                      AND NOT w.is_terminal)
        -- The day's scripts, and those of any day the recovery pass acts on
        -- (mdame_pipeline.recovery.STALLED_STATES); another day's script waiting for its own
        -- partition's stage is that partition's work, not this one's.
        OR EXISTS (SELECT FROM scripts sc
                     JOIN work_states w ON (w.kind, w.state) = (sc.kind, sc.state)
                    WHERE sc.dimension_id = a.dimension_id AND NOT w.is_terminal
                      AND (sc.partition_date = p_day
                           OR sc.state IN ('voice_queued', 'render_queued', 'publishing')))
        OR EXISTS (SELECT FROM publications p
                     JOIN scripts sc ON sc.id = p.script_id
                     JOIN work_states w ON (w.kind, w.state) = (p.kind, p.state)
                    WHERE sc.dimension_id = a.dimension_id AND sc.partition_date = p_day
                      AND NOT w.is_terminal)
        OR EXISTS (SELECT FROM open_jobs j WHERE j.partition_key = a.partition_key)
        OR EXISTS (SELECT FROM unsettled u WHERE u.slug = a.slug)
  ), '{}');
END
$function$;
REVOKE ALL ON FUNCTION mdame.unfinished_partitions(p_day date, p_slugs text[]) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.unfinished_partitions(p_day date, p_slugs text[]) TO mdame_app;
