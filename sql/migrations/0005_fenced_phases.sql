-- 0005: fenced writes and atomic phases.
--
-- Fencing. Every RPC that changes a partition's work takes the caller's pipeline-lock token and
-- refuses with MD007 unless that token is the live token of the work's dimension lock
-- ('pipeline:<slug>'). The check takes a share lock on the lock row, so a takeover waits for the
-- write in flight: a write either commits under the live holder or is refused. A run that lost
-- its lock (a heartbeat blip, a pause longer than the TTL) can no longer write anything.
--
-- Atomic phases (Brandur Leach's rocket-rides model). A stage's unit of work and its recovery
-- point commit together in one RPC: record_trends, decide_topic, record_script, plan_scenes,
-- complete_scene_job, finish_visuals, record_voice, record_render, begin_upload,
-- finish_upload, reconcile_upload, fail_script. A crash between two phases leaves the state of
-- the last phase, which the next run resumes from; nothing is ever half done.
--
-- The generic RPCs of 0002 that write partition work keep their bodies under an internal name
-- (_transition, ...; EXECUTE revoked from the app) and gain fenced public versions that take
-- p_lock_token last.
--
-- New error class: MD007 fenced out (the token is not, or no longer, the live lock token).

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- =============================================================================================
-- The fence.
-- =============================================================================================
CREATE FUNCTION mdame.dimension_lock_name(p_slug text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  -- The Python side (mdame_assets.runtime.dimension_lock_name) builds the same name.
  SELECT 'pipeline:' || p_slug
$$;

-- Raises MD007 unless p_token is the live token of the dimension's pipeline lock.
CREATE FUNCTION mdame._fence(p_dimension_id bigint, p_token bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_slug text;
  v_lock mdame.system_locks;
BEGIN
  IF p_token IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = 'mdame: fenced: this write needs the pipeline lock token (got NULL)';
  END IF;
  SELECT slug INTO v_slug FROM mdame.dimensions WHERE id = p_dimension_id;
  IF v_slug IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: dimension %s does not exist', p_dimension_id);
  END IF;
  SELECT * INTO v_lock FROM mdame.system_locks
   WHERE lock_name = mdame.dimension_lock_name(v_slug) FOR SHARE;
  IF v_lock.token IS DISTINCT FROM p_token OR v_lock.released_at IS NOT NULL
     OR v_lock.expires_at <= now() THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = format('mdame: fenced: lock token %s does not hold %s (%s)', p_token,
                       mdame.dimension_lock_name(v_slug),
                       CASE WHEN v_lock.token IS NULL THEN 'never acquired'
                            WHEN v_lock.token <> p_token THEN format('now token %s', v_lock.token)
                            WHEN v_lock.released_at IS NOT NULL THEN 'released'
                            ELSE 'expired' END);
  END IF;
END
$$;

-- Raises MD007 unless p_token is the live token of some lock (for work without a dimension).
CREATE FUNCTION mdame._fence_token(p_token bigint) RETURNS mdame.system_locks
LANGUAGE plpgsql AS $$
DECLARE
  v_lock mdame.system_locks;
BEGIN
  SELECT * INTO v_lock FROM mdame.system_locks WHERE token = p_token FOR SHARE;
  IF v_lock.token IS NULL OR v_lock.released_at IS NOT NULL OR v_lock.expires_at <= now() THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = format('mdame: fenced: lock token %s is not a live lock token',
                       coalesce(p_token::text, 'NULL'));
  END IF;
  RETURN v_lock;
END
$$;

-- The dimension a work unit belongs to: its own dimension_id, or its script's.
CREATE FUNCTION mdame._unit_dimension(p_kind text, p_id bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_table text := (mdame._work_kind(p_kind)).table_name;
  v_dimension bigint;
BEGIN
  PERFORM mdame._require_not_null('id', p_id);
  IF v_table IN ('trends', 'topics', 'scripts') THEN
    EXECUTE format('SELECT dimension_id FROM mdame.%I WHERE id = $1', v_table)
       INTO v_dimension USING p_id;
  ELSE
    EXECUTE format('SELECT s.dimension_id FROM mdame.%I u JOIN mdame.scripts s ON s.id = u.script_id
                     WHERE u.id = $1', v_table)
       INTO v_dimension USING p_id;
  END IF;
  IF v_dimension IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: %s %s does not exist', p_kind, coalesce(p_id::text, 'NULL'));
  END IF;
  RETURN v_dimension;
END
$$;

-- The dimension a new unit's payload names: dimension_id, or script_id's dimension.
CREATE FUNCTION mdame._payload_dimension(p_kind text, p_payload jsonb) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_dimension bigint;
BEGIN
  IF p_payload ? 'dimension_id' THEN
    v_dimension := (p_payload ->> 'dimension_id')::bigint;
  ELSIF p_payload ? 'script_id' THEN
    v_dimension := mdame._unit_dimension('script', (p_payload ->> 'script_id')::bigint);
  ELSE
    PERFORM mdame._invalid(format('payload for kind %s names neither dimension_id nor script_id',
                                  (mdame._work_kind(p_kind)).kind));
  END IF;
  RETURN v_dimension;
EXCEPTION
  WHEN invalid_text_representation OR numeric_value_out_of_range THEN
    PERFORM mdame._invalid(format('payload for kind %s has a non-integer dimension_id/script_id',
                                  mdame._clip(p_kind, 80)));
    RETURN NULL;
END
$$;

-- =============================================================================================
-- The 0002 writers keep their bodies under internal names; the public ones are fenced.
-- =============================================================================================
ALTER FUNCTION mdame.upsert_work_unit(text, text, jsonb) RENAME TO _upsert_work_unit;
ALTER FUNCTION mdame.transition(text, bigint, text, text, jsonb) RENAME TO _transition;
ALTER FUNCTION mdame.bump_work_attempt(text, bigint, jsonb) RENAME TO _bump_work_attempt;
ALTER FUNCTION mdame.record_attempt(text, text, text, text, jsonb) RENAME TO _record_attempt;
ALTER FUNCTION mdame.finish_attempt(bigint, text, jsonb) RENAME TO _finish_attempt;
ALTER FUNCTION mdame.reconcile_attempt(bigint, text, jsonb) RENAME TO _reconcile_attempt;
ALTER FUNCTION mdame.log_safety_decision(text, text, text, text, text, jsonb, text)
  RENAME TO _log_safety_decision;
ALTER FUNCTION mdame.record_review(bigint, text, text, text, jsonb) RENAME TO _record_review;
REVOKE EXECUTE ON FUNCTION
  mdame._upsert_work_unit(text, text, jsonb),
  mdame._transition(text, bigint, text, text, jsonb),
  mdame._bump_work_attempt(text, bigint, jsonb),
  mdame._record_attempt(text, text, text, text, jsonb),
  mdame._finish_attempt(bigint, text, jsonb),
  mdame._reconcile_attempt(bigint, text, jsonb),
  mdame._log_safety_decision(text, text, text, text, text, jsonb, text),
  mdame._record_review(bigint, text, text, text, jsonb)
FROM mdame_app, PUBLIC;

CREATE FUNCTION mdame.upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb,
                                       p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_json('payload', p_payload);
  PERFORM mdame._fence(mdame._payload_dimension(p_kind, p_payload), p_lock_token);
  RETURN mdame._upsert_work_unit(p_kind, p_idempotency_key, p_payload);
END
$$;

CREATE FUNCTION mdame.transition(p_kind text, p_id bigint, p_from_state text, p_to_state text,
                                 p_detail jsonb, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension(p_kind, p_id), p_lock_token);
  RETURN mdame._transition(p_kind, p_id, p_from_state, p_to_state, p_detail);
END
$$;

CREATE FUNCTION mdame.bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb,
                                        p_lock_token bigint)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension(p_kind, p_id), p_lock_token);
  RETURN mdame._bump_work_attempt(p_kind, p_id, p_detail);
END
$$;

CREATE FUNCTION mdame.log_safety_decision(p_subject_kind text, p_subject_key text,
                                          p_dimension_slug text, p_verdict text, p_rule text,
                                          p_reasons jsonb, p_classifier text, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  IF p_dimension_slug IS NULL THEN  -- a decision about no dimension's work
    PERFORM mdame._fence_token(p_lock_token);
  ELSE
    PERFORM mdame._fence(mdame._dimension_id(p_dimension_slug), p_lock_token);
  END IF;
  RETURN mdame._log_safety_decision(p_subject_kind, p_subject_key, p_dimension_slug, p_verdict,
                                    p_rule, p_reasons, p_classifier);
END
$$;

CREATE FUNCTION mdame.record_review(p_render_id bigint, p_content_sha256 text, p_check_name text,
                                    p_verdict text, p_detail jsonb, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('render', p_render_id), p_lock_token);
  RETURN mdame._record_review(p_render_id, p_content_sha256, p_check_name, p_verdict, p_detail);
END
$$;

-- =============================================================================================
-- Provider attempts under a lease. An attempt remembers the lock token that submitted it and
-- a lease: the submitting lock's expiry plus a grace for the call in flight (the provider's
-- longest single request). The lock's heartbeats extend it. Only the current lock holder may
-- settle another holder's 'submitted' attempt, and only once that lease has passed: by then the
-- old holder has stopped (its heartbeat failed, so it cancelled itself) and its last request
-- has ended, so asking the provider gives the final answer.
-- =============================================================================================
ALTER TABLE provider_attempts
  ADD COLUMN lock_token bigint,
  ADD COLUMN lease_grace_seconds integer CHECK (lease_grace_seconds >= 0),
  ADD COLUMN lease_expires_at timestamptz;

CREATE FUNCTION mdame.record_attempt(p_work_key text, p_provider text, p_request_hash text,
                                     p_status text, p_detail jsonb, p_lock_token bigint,
                                     p_grace_seconds integer DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_lock system_locks := mdame._fence_token(p_lock_token);
  v_id bigint;
BEGIN
  PERFORM mdame._require_range('grace_seconds', p_grace_seconds, 0, 86400);
  v_id := mdame._record_attempt(p_work_key, p_provider, p_request_hash, p_status, p_detail);
  UPDATE provider_attempts
     SET lock_token = p_lock_token, lease_grace_seconds = p_grace_seconds,
         lease_expires_at = v_lock.expires_at + p_grace_seconds * interval '1 second'
   WHERE id = v_id;
  RETURN v_id;
END
$$;

CREATE FUNCTION mdame.finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb,
                                     p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence_token(p_lock_token);
  PERFORM mdame._require_attempt_holder(p_attempt_id, p_lock_token, NULL);
  RETURN mdame._finish_attempt(p_attempt_id, p_status, p_detail);
END
$$;

-- Refuses (MD004) to let p_token settle an attempt another token submitted while that
-- holder's lease is still running, or when the provider was asked before the lease ended
-- (p_asked_at; NULL when the caller did not ask, e.g. finishing its own attempt).
CREATE FUNCTION mdame._require_attempt_holder(p_attempt_id bigint, p_token bigint,
                                              p_asked_at timestamptz)
RETURNS mdame.provider_attempts
LANGUAGE plpgsql AS $$
DECLARE
  v_attempt mdame.provider_attempts := mdame._lock_attempt(p_attempt_id);
BEGIN
  IF v_attempt.lock_token IS NULL OR v_attempt.lock_token = p_token
     OR v_attempt.status NOT IN ('submitted') THEN
    RETURN v_attempt;
  END IF;
  IF v_attempt.lease_expires_at > now() OR p_asked_at IS NULL
     OR p_asked_at < v_attempt.lease_expires_at THEN
    RAISE EXCEPTION USING ERRCODE = 'MD004',
      MESSAGE = format('mdame: attempt %s was submitted under lock token %s, whose lease runs '
                       'until %s: settle it after that, from an answer asked after it',
                       p_attempt_id, v_attempt.lock_token, v_attempt.lease_expires_at);
  END IF;
  RETURN v_attempt;
END
$$;

CREATE FUNCTION mdame.reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb,
                                        p_lock_token bigint, p_asked_at timestamptz)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence_token(p_lock_token);
  PERFORM mdame._require_attempt_holder(p_attempt_id, p_lock_token, p_asked_at);
  RETURN mdame._reconcile_attempt(p_attempt_id, p_final_status, p_detail);
END
$$;

-- The lock's heartbeat also extends the leases of the attempts its holder has in flight.
CREATE OR REPLACE FUNCTION mdame.heartbeat_pipeline_lock(p_lock_name text, p_holder text,
                                                         p_token bigint,
                                                         p_ttl_seconds integer DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_expires timestamptz;
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
   WHERE lock_name = p_lock_name AND holder = p_holder AND token = p_token
     AND released_at IS NULL
  RETURNING expires_at INTO v_expires;
  IF v_expires IS NULL THEN
    PERFORM mdame._lock_lost(p_lock_name, p_holder, p_token);
  END IF;
  UPDATE provider_attempts
     SET lease_expires_at = v_expires + lease_grace_seconds * interval '1 second'
   WHERE lock_token = p_token AND status = 'submitted';
  RETURN v_expires;
END
$$;

-- =============================================================================================
-- Phases. Each is one transaction: its work and its recovery point commit together.
-- =============================================================================================
CREATE FUNCTION mdame._require_state(p_kind text, p_id bigint, p_states text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text := mdame._lock_work_unit(mdame._work_kind(p_kind), p_id);
BEGIN
  IF NOT v_state = ANY (p_states) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: %s %s is in state %s, not %s', p_kind, p_id, v_state,
                       array_to_string(p_states, ' or '));
  END IF;
  RETURN v_state;
END
$$;

-- trends: the day's scored items of a dimension, all stored or none. p_items is an array of
-- {"key": idempotency_key, "payload": {...}}. Returns the trend ids in input order.
CREATE FUNCTION mdame.record_trends(p_dimension_slug text, p_items jsonb, p_lock_token bigint)
RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_item jsonb;
  v_ids bigint[] := ARRAY[]::bigint[];
BEGIN
  PERFORM mdame._require_json('items', p_items, 'array');
  PERFORM mdame._fence(v_dimension, p_lock_token);
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF (v_item -> 'payload' ->> 'dimension_id')::bigint IS DISTINCT FROM v_dimension THEN
      PERFORM mdame._invalid(format('trend %s belongs to another dimension than %s',
                                    left(v_item ->> 'key', 80), p_dimension_slug));
    END IF;
    v_ids := v_ids || mdame._upsert_work_unit('trend', v_item ->> 'key', v_item -> 'payload');
  END LOOP;
  RETURN v_ids;
END
$$;

-- The safety verdict of a topic or script decides its next state.
CREATE FUNCTION mdame._verdict_state(p_verdict text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_verdict WHEN 'allow' THEN 'approved' ELSE 'rejected' END
$$;

-- topics: creates the topic of a trend (once) and, while it is a candidate, logs the safety
-- decision and approves or rejects it, together. p_decision: {"verdict", "rule", "reasons",
-- "classifier"}. Returns the topic id.
CREATE FUNCTION mdame.decide_topic(p_idempotency_key text, p_payload jsonb, p_decision jsonb,
                                   p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
  v_trend_key text;
BEGIN
  PERFORM mdame._require_json('decision', p_decision);
  PERFORM mdame._fence(mdame._payload_dimension('topic', p_payload), p_lock_token);
  v_id := mdame._upsert_work_unit('topic', p_idempotency_key, p_payload);
  IF mdame._lock_work_unit(mdame._work_kind('topic'), v_id) = 'candidate' THEN
    SELECT t.idempotency_key INTO v_trend_key
      FROM topics o JOIN trends t ON t.id = o.trend_id WHERE o.id = v_id;
    PERFORM mdame._log_decision('topic', coalesce(v_trend_key, p_idempotency_key),
                                (p_payload ->> 'dimension_id')::bigint, p_decision);
    PERFORM mdame._transition('topic', v_id, 'candidate',
                              mdame._verdict_state(p_decision ->> 'verdict'),
                              jsonb_build_object('safety_rule', p_decision ->> 'rule'));
  END IF;
  RETURN v_id;
END
$$;

CREATE FUNCTION mdame._log_decision(p_subject_kind text, p_subject_key text, p_dimension_id bigint,
                                    p_decision jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN mdame._log_safety_decision(
    p_subject_kind, p_subject_key, (SELECT slug FROM mdame.dimensions WHERE id = p_dimension_id),
    p_decision ->> 'verdict', p_decision ->> 'rule', coalesce(p_decision -> 'reasons', '[]'),
    p_decision ->> 'classifier');
END
$$;

-- scripts: creates the topic's script (once) and, while drafted, logs its safety decision,
-- approves or rejects it, and marks the topic scripted, together. Returns the script id.
CREATE FUNCTION mdame.record_script(p_idempotency_key text, p_payload jsonb, p_decision jsonb,
                                    p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
  v_topic bigint := (p_payload ->> 'topic_id')::bigint;
BEGIN
  PERFORM mdame._require_json('decision', p_decision);
  PERFORM mdame._fence(mdame._payload_dimension('script', p_payload), p_lock_token);
  v_id := mdame._upsert_work_unit('script', p_idempotency_key, p_payload);
  IF mdame._lock_work_unit(mdame._work_kind('script'), v_id) = 'drafted' THEN
    PERFORM mdame._log_decision('script', p_idempotency_key,
                                (p_payload ->> 'dimension_id')::bigint, p_decision);
    PERFORM mdame._transition('script', v_id, 'drafted',
                              mdame._verdict_state(p_decision ->> 'verdict'),
                              jsonb_build_object('safety_rule', p_decision ->> 'rule'));
  END IF;
  IF mdame._lock_work_unit(mdame._work_kind('topic'), v_topic) = 'approved' THEN
    PERFORM mdame._transition('topic', v_topic, 'approved', 'scripted',
                              jsonb_build_object('script_id', v_id));
  END IF;
  RETURN v_id;
END
$$;

-- scene_plan: an approved script's scenes, each ready from the cache (the caller verified the
-- cached file) or queued with its GPU job, and the script planned, together. p_scenes: an array
-- of {"key", "payload", "cached": {"uri", "sha256"} | null, "job": {...job payload} }.
-- Returns the number of jobs enqueued.
CREATE FUNCTION mdame.plan_scenes(p_script_id bigint, p_scenes jsonb, p_job_type text,
                                  p_max_attempts integer, p_partition_key text,
                                  p_lock_token bigint)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_scene jsonb;
  v_id bigint;
  v_queued integer := 0;
BEGIN
  PERFORM mdame._require_json('scenes', p_scenes, 'array');
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['approved']);
  IF jsonb_array_length(p_scenes) = 0 THEN
    PERFORM mdame._invalid(format('script %s: a plan needs at least one scene', p_script_id));
  END IF;
  FOR v_scene IN SELECT value FROM jsonb_array_elements(p_scenes) LOOP
    IF (v_scene -> 'payload' ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
      PERFORM mdame._invalid(format('scene %s belongs to another script than %s',
                                    left(v_scene ->> 'key', 80), p_script_id));
    END IF;
    v_id := mdame._upsert_work_unit('scene', v_scene ->> 'key', v_scene -> 'payload');
    CONTINUE WHEN mdame._lock_work_unit(mdame._work_kind('scene'), v_id) <> 'planned';
    IF jsonb_typeof(v_scene -> 'cached') = 'object' THEN
      PERFORM mdame._transition('scene', v_id, 'planned', 'ready',
        jsonb_build_object('uri', v_scene -> 'cached' ->> 'uri',
                           'sha256', v_scene -> 'cached' ->> 'sha256', 'cached', true));
    ELSE
      PERFORM mdame.enqueue_job(p_job_type, v_scene ->> 'key',
                                (v_scene -> 'job') || jsonb_build_object('scene_id', v_id),
                                p_max_attempts, 100, 0, p_partition_key);
      PERFORM mdame._transition('scene', v_id, 'planned', 'queued', '{}');
      v_queued := v_queued + 1;
    END IF;
  END LOOP;
  PERFORM mdame._transition('script', p_script_id, 'approved', 'planned',
                            jsonb_build_object('scenes', jsonb_array_length(p_scenes)));
  RETURN v_queued;
END
$$;

-- A scene job's result: the clip enters the scene cache (a live entry of another writer wins),
-- the job's scene becomes ready with the entry in effect, and the job succeeds, together. The
-- job lease fences it (a reaped worker's late result is refused with MD004). Returns the entry
-- in effect. Repeating it after a lost reply returns the same entry.
CREATE FUNCTION mdame.complete_scene_job(p_job_id bigint, p_worker_id text, p_attempt integer,
                                         p_uri text, p_content_sha256 text, p_cache_hit boolean,
                                         p_ttl_seconds integer)
RETURNS TABLE (uri text, content_sha256 text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_job jobs;
  v_uri text;
  v_sha text;
  v_scene_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('cache_hit', p_cache_hit);
  SELECT * INTO v_job FROM jobs j WHERE j.id = p_job_id FOR UPDATE;
  IF v_job.state = 'succeeded' AND v_job.lease_owner = p_worker_id AND v_job.attempt = p_attempt THEN
    RETURN QUERY SELECT v_job.result ->> 'uri', v_job.result ->> 'sha256';
    RETURN;
  ELSIF v_job.id IS NULL OR v_job.state <> 'running' OR v_job.lease_owner <> p_worker_id
        OR v_job.attempt <> p_attempt THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  SELECT e.uri, e.content_sha256 INTO v_uri, v_sha
    FROM mdame.put_scene_cache(v_job.payload ->> 'scene_hash', p_uri, p_content_sha256, p_ttl_seconds) e;
  v_scene_state := mdame._lock_work_unit(mdame._work_kind('scene'),
                                         (v_job.payload ->> 'scene_id')::bigint);
  IF v_scene_state IN ('planned', 'queued') THEN
    PERFORM mdame._transition('scene', (v_job.payload ->> 'scene_id')::bigint, v_scene_state,
      'ready', jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                  'cached', p_cache_hit));
  END IF;
  UPDATE jobs j
     SET state = 'succeeded', lease_expires_at = NULL, finished_at = now(), updated_at = now(),
         result = jsonb_build_object('uri', v_uri, 'sha256', v_sha,
                                     'cache_hit', p_cache_hit)
   WHERE j.id = p_job_id;
  RETURN QUERY SELECT v_uri, v_sha;
END
$$;

-- scene_clips, per script: visuals_ready once every scene is ready; failed (with its scenes)
-- once a scene's job is dead or failed; otherwise still planned. Returns the script's state.
CREATE FUNCTION mdame.finish_visuals(p_script_id bigint, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dead bigint[];
  v_waiting integer;
  v_scene bigint;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['planned']);
  SELECT array_agg(s.id ORDER BY s.id) FILTER (WHERE j.state IN ('dead', 'failed')),
         count(*) FILTER (WHERE s.state <> 'ready')
    INTO v_dead, v_waiting
    FROM scenes s LEFT JOIN jobs j ON j.idempotency_key = s.idempotency_key
   WHERE s.script_id = p_script_id AND s.state <> 'ready';
  IF v_dead IS NOT NULL THEN
    FOREACH v_scene IN ARRAY v_dead LOOP
      PERFORM mdame._transition('scene', v_scene, mdame._lock_work_unit(mdame._work_kind('scene'), v_scene),
                                'failed', '{"reason": "job dead after max attempts"}');
    END LOOP;
    PERFORM mdame._transition('script', p_script_id, 'planned', 'failed',
                              jsonb_build_object('failed_scenes', to_jsonb(v_dead)));
    RETURN 'failed';
  ELSIF v_waiting = 0 THEN
    PERFORM mdame._transition('script', p_script_id, 'planned', 'visuals_ready', '{}');
    RETURN 'visuals_ready';
  END IF;
  RETURN 'planned';
END
$$;

-- voice_tracks: the synthesized track (once) and the script voiced, together. Returns its id.
CREATE FUNCTION mdame.record_voice(p_script_id bigint, p_idempotency_key text, p_payload jsonb,
                                   p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['voice_queued']);
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('voice track payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('voice_track', p_idempotency_key, p_payload);
  PERFORM mdame._transition('script', p_script_id, 'voice_queued', 'voiced',
                            jsonb_build_object('voice_track_id', v_id));
  RETURN v_id;
END
$$;

-- renders: the render (once), its technical review bound to its SHA-256, its verdict, and the
-- script rendered (or failed with the problems), together. p_payload carries "sha256" and
-- "problems" (an array; empty means approved). Returns the script's new state.
CREATE FUNCTION mdame.record_render(p_script_id bigint, p_idempotency_key text, p_payload jsonb,
                                    p_check_name text, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
  v_problems jsonb := p_payload -> 'problems';
  v_verdict text;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['render_queued']);
  PERFORM mdame._require_json('payload.problems', v_problems, 'array');
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('render payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('render', p_idempotency_key, p_payload);
  v_verdict := CASE WHEN jsonb_array_length(v_problems) = 0 THEN 'approved' ELSE 'rejected' END;
  IF mdame._lock_work_unit(mdame._work_kind('render'), v_id) = 'rendered' THEN
    PERFORM mdame._record_review(v_id, p_payload ->> 'sha256', p_check_name, v_verdict,
                                 jsonb_build_object('problems', v_problems));
    PERFORM mdame._transition('render', v_id, 'rendered', v_verdict, '{}');
  END IF;
  IF v_verdict = 'approved' THEN
    PERFORM mdame._transition('script', p_script_id, 'render_queued', 'rendered',
                              jsonb_build_object('render_id', v_id));
    RETURN 'rendered';
  END IF;
  PERFORM mdame._transition('script', p_script_id, 'render_queued', 'failed',
                            jsonb_build_object('render_id', v_id, 'render_problems', v_problems));
  RETURN 'failed';
END
$$;

-- =============================================================================================
-- Publishing, Stripe style: begin_upload (publication, quota reservation, attempt 'submitted',
-- publication 'uploading': the recovery point before the side effect), the upload itself, then
-- finish_upload (outcome, publication state and quota, together) or, after a crash or an
-- unknown outcome, reconcile_upload from the channel's answer. Never a second submission while
-- an earlier one's outcome is unknown.
-- =============================================================================================
-- Returns (publication_id, action, attempt_id): action 'published' (nothing to do), 'no_quota'
-- (nothing reserved, nothing changed but the publication's creation), 'reconcile' (an earlier
-- submission's outcome must be settled first; attempt_id is it) or 'submit' (upload now, then
-- finish_upload(attempt_id)).
CREATE FUNCTION mdame.begin_upload(p_idempotency_key text, p_payload jsonb, p_units integer,
                                   p_provider text, p_required_reviews text[],
                                   p_grace_seconds integer, p_lock_token bigint)
RETURNS TABLE (publication_id bigint, action text, attempt_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_sha text := p_payload ->> 'content_sha256';
BEGIN
  PERFORM mdame._fence(mdame._payload_dimension('publication', p_payload), p_lock_token);
  PERFORM mdame._require_sha256('payload.content_sha256', v_sha);
  v_pub.id := mdame._upsert_work_unit('publication', p_idempotency_key, p_payload);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), v_pub.id);
  SELECT * INTO v_pub FROM publications WHERE id = v_pub.id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = p_idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_pub.state = 'published' THEN
    RETURN QUERY SELECT v_pub.id, 'published'::text, v_attempt.id;
    RETURN;
  ELSIF v_pub.state = 'uploading' OR v_attempt.status IN ('submitted', 'unknown') THEN
    RETURN QUERY SELECT v_pub.id, 'reconcile'::text, v_attempt.id;
    RETURN;
  ELSIF v_pub.state <> 'pending' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s', v_pub.id, v_pub.state);
  END IF;
  IF NOT mdame.is_approved(v_pub.render_id, v_sha, p_required_reviews) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: render %s is not approved as %s by every one of %s',
                       v_pub.render_id, left(v_sha, 12),
                       mdame._clip(array_to_string(p_required_reviews, ', '), 200));
  END IF;
  IF mdame.reserve_quota(v_pub.account_id, p_units, p_idempotency_key) IS NULL THEN
    RETURN QUERY SELECT v_pub.id, 'no_quota'::text, NULL::bigint;
    RETURN;
  END IF;
  PERFORM mdame._transition('publication', v_pub.id, 'pending', 'uploading', '{}');
  v_attempt.id := mdame.record_attempt(p_idempotency_key, p_provider, v_sha, 'submitted', '{}',
                                       p_lock_token, p_grace_seconds);
  RETURN QUERY SELECT v_pub.id, 'submit'::text, v_attempt.id;
END
$$;

-- Settles an upload attempt and its publication together: succeeded -> published with the
-- video id and the quota committed; failed (a definite refusal) -> pending again with the quota
-- released; unknown (no answer) -> everything stays reserved for reconcile_upload.
CREATE FUNCTION mdame._settle_upload(p_pub publications, p_attempt provider_attempts,
                                     p_status text, p_video_id text, p_detail jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text := p_pub.state;
BEGIN
  IF p_status = 'succeeded' THEN
    IF p_video_id IS NULL OR p_video_id = '' THEN
      PERFORM mdame._invalid('a succeeded upload needs its video_id');
    END IF;
    IF v_state = 'uploading' THEN
      PERFORM mdame._transition('publication', p_pub.id, 'uploading', 'published',
                                p_detail || jsonb_build_object('video_id', p_video_id));
      v_state := 'published';
    END IF;
    PERFORM mdame.commit_quota(p_pub.idempotency_key);
  ELSIF p_status = 'failed' THEN
    IF v_state = 'uploading' THEN
      PERFORM mdame._transition('publication', p_pub.id, 'uploading', 'pending', p_detail);
      v_state := 'pending';
    END IF;
    PERFORM mdame.release_quota(p_pub.idempotency_key);
  END IF;
  RETURN v_state;
END
$$;

CREATE FUNCTION mdame._attempt_publication(p_attempt_id bigint) RETURNS mdame.publications
LANGUAGE plpgsql AS $$
DECLARE
  v_pub mdame.publications;
BEGIN
  SELECT p.* INTO v_pub FROM mdame.publications p
    JOIN mdame.provider_attempts a ON a.work_key = p.idempotency_key
   WHERE a.id = mdame._require_not_null('attempt_id', p_attempt_id);
  IF v_pub.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: attempt %s is not a publication''s upload', p_attempt_id);
  END IF;
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), v_pub.id);
  RETURN v_pub;
END
$$;

-- The outcome of this holder's own upload. Returns the publication's state.
CREATE FUNCTION mdame.finish_upload(p_attempt_id bigint, p_status text, p_video_id text,
                                    p_detail jsonb, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications := mdame._attempt_publication(p_attempt_id);
  v_attempt provider_attempts;
BEGIN
  PERFORM mdame._require_one_of('status', p_status, ARRAY['succeeded', 'failed', 'unknown']),
          mdame._require_json('detail', p_detail);
  PERFORM mdame._fence(mdame._unit_dimension('publication', v_pub.id), p_lock_token);
  v_attempt := mdame._require_attempt_holder(p_attempt_id, p_lock_token, NULL);
  PERFORM mdame._finish_attempt(p_attempt_id, p_status,
                                p_detail || jsonb_build_object('video_id', p_video_id));
  RETURN mdame._settle_upload(v_pub, v_attempt, p_status, p_video_id, p_detail);
END
$$;

-- Settles the publication's unsettled upload from the channel's answer (p_video_id, NULL when
-- the channel has none), asked at p_asked_at (the database's clock, read before asking).
-- Another holder's submission may only be settled from an answer asked after its lease ended.
-- Returns the publication's state.
CREATE FUNCTION mdame.reconcile_upload(p_publication_id bigint, p_video_id text,
                                       p_asked_at timestamptz, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_status text := CASE WHEN p_video_id IS NULL OR p_video_id = '' THEN 'failed' ELSE 'succeeded' END;
BEGIN
  PERFORM mdame._require_not_null('asked_at', p_asked_at);
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = v_pub.idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_attempt.status IN ('submitted', 'unknown') THEN
    PERFORM mdame._require_attempt_holder(v_attempt.id, p_lock_token, p_asked_at);
    PERFORM mdame._reconcile_attempt(v_attempt.id, v_status,
                                     jsonb_build_object('video_id', p_video_id));
  ELSIF v_pub.state <> 'uploading' THEN
    RETURN v_pub.state;  -- nothing unsettled: a repeat after a lost reply
  END IF;
  RETURN mdame._settle_upload(v_pub, v_attempt, v_status, p_video_id,
                              '{"reconciled": true}'::jsonb);
END
$$;

-- Gives up on a script that stalled too often (the recovery pass): its pending publications
-- fail and their quota reservations are released, together with the script. Nothing may be
-- out or in flight (the caller reconciled first); returns false when something is. The caller
-- states the state it decided on: a script that moved on meanwhile raises MD003 (re-read).
CREATE FUNCTION mdame.fail_script(p_script_id bigint, p_from_state text, p_reason text,
                                  p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_state text;
  v_pub publications;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
                                  ARRAY[mdame._require_text('from_state', p_from_state, 64)]);
  IF EXISTS (SELECT FROM publications p WHERE p.script_id = p_script_id
                AND (p.state IN ('uploading', 'published') OR EXISTS (
                     SELECT FROM provider_attempts a WHERE a.work_key = p.idempotency_key
                        AND a.status IN ('submitted', 'unknown')))) THEN
    RETURN false;
  END IF;
  FOR v_pub IN SELECT * FROM publications WHERE script_id = p_script_id AND state = 'pending' LOOP
    IF EXISTS (SELECT FROM quota_ledger WHERE quota_key = v_pub.idempotency_key
                  AND state = 'reserved') THEN
      PERFORM mdame.release_quota(v_pub.idempotency_key);
    END IF;
    PERFORM mdame._transition('publication', v_pub.id, 'pending', 'failed',
                              jsonb_build_object('reason', p_reason));
  END LOOP;
  PERFORM mdame._transition('script', p_script_id, v_state, 'failed',
                            jsonb_build_object('reason', p_reason));
  RETURN true;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.upsert_work_unit(text, text, jsonb, bigint),
  mdame.transition(text, bigint, text, text, jsonb, bigint),
  mdame.bump_work_attempt(text, bigint, jsonb, bigint),
  mdame.log_safety_decision(text, text, text, text, text, jsonb, text, bigint),
  mdame.record_review(bigint, text, text, text, jsonb, bigint),
  mdame.record_attempt(text, text, text, text, jsonb, bigint, integer),
  mdame.finish_attempt(bigint, text, jsonb, bigint),
  mdame.reconcile_attempt(bigint, text, jsonb, bigint, timestamptz),
  mdame.record_trends(text, jsonb, bigint),
  mdame.decide_topic(text, jsonb, jsonb, bigint),
  mdame.record_script(text, jsonb, jsonb, bigint),
  mdame.plan_scenes(bigint, jsonb, text, integer, text, bigint),
  mdame.complete_scene_job(bigint, text, integer, text, text, boolean, integer),
  mdame.finish_visuals(bigint, bigint),
  mdame.record_voice(bigint, text, jsonb, bigint),
  mdame.record_render(bigint, text, jsonb, text, bigint),
  mdame.begin_upload(text, jsonb, integer, text, text[], integer, bigint),
  mdame.finish_upload(bigint, text, text, jsonb, bigint),
  mdame.reconcile_upload(bigint, text, timestamptz, bigint),
  mdame.fail_script(bigint, text, text, bigint),
  mdame.dimension_lock_name(text)
TO mdame_app;

-- =============================================================================================
-- Media that vanished or rotted heals: a cache entry whose file is missing or corrupt is
-- dropped (with an event), so the scene is generated again. Only the entry naming that very
-- file is dropped: one another writer replaced meanwhile stays. Returns whether it was dropped.
-- =============================================================================================
CREATE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_deleted integer;
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128), mdame._require_text('uri', p_uri, 2000),
          mdame._require_text('reason', p_reason, 2000);
  DELETE FROM scene_cache WHERE scene_hash = p_scene_hash AND uri = p_uri;
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted > 0 THEN
    INSERT INTO events (subject_kind, subject_id, event, detail)
    VALUES ('scene_cache', 0, 'invalidated',
            jsonb_build_object('scene_hash', p_scene_hash, 'uri', p_uri, 'reason', left(p_reason, 500)));
  END IF;
  RETURN v_deleted > 0;
END
$$;
GRANT EXECUTE ON FUNCTION mdame.invalidate_scene_cache(text, text, text) TO mdame_app;
