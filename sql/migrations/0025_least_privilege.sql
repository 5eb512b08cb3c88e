-- 0025: least privilege. The pipeline's role (mdame_app) keeps only the RPCs the pipeline
-- calls, each fenced by its work's own dimension lock; what changes money caps, quota and
-- budget ledgers directly, channel grants, the dimension registry and the job queue belongs to
-- mdame_admin, the role of the operator's commands. Any host that holds the app URL (a GPU
-- worker, the webserver) can therefore no longer raise a cap, release a reservation in flight,
-- overwrite a grant or reconfigure a dimension.
--
-- tests/state/app_role_functions.txt is the reviewed list of what mdame_app may execute; a
-- test compares it with the database, so a grant cannot widen unnoticed.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- The admin role normally exists (scripts/db-local.sh creates it); on an external database
-- create it here. The owner is a member, so the operator's owner URL can act as admin.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mdame_admin') THEN
    CREATE ROLE mdame_admin NOLOGIN;
    EXECUTE format('GRANT mdame_admin TO %I', current_user);
  END IF;
END
$$;

GRANT USAGE ON SCHEMA mdame TO mdame_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA mdame TO mdame_admin;
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame
  GRANT SELECT ON TABLES TO mdame_admin;
-- A new function is the owner's alone until its migration grants it to a role by name.
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame
  REVOKE EXECUTE ON FUNCTIONS FROM mdame_app;

-- The admin reads what the app reads.
DO $$
DECLARE
  v_table text;
BEGIN
  FOR v_table IN SELECT c.relname FROM pg_class c
                  WHERE c.relnamespace = 'mdame'::regnamespace AND c.relkind IN ('r', 'p')
  LOOP
    EXECUTE format('CREATE POLICY admin_reads ON mdame.%I FOR SELECT TO mdame_admin USING (true)',
                   v_table);
  END LOOP;
END
$$;

-- =============================================================================================
-- Operator commands: the admin's, not the app's.
-- =============================================================================================
DO $$
DECLARE
  v_function text;
BEGIN
  FOREACH v_function IN ARRAY ARRAY[
    'set_budget_cap(text, text, bigint)',
    'reserve_budget(text, text, bigint, text)',
    'settle_budget(text, bigint)',
    'release_budget(text)',
    'reserve_quota(bigint, integer, text)',
    'reserve_bucket_quota(bigint, text, integer, text)',
    'commit_quota(text)',
    'release_quota(text)',
    'put_scene_cache(text, text, text, integer)',
    'invalidate_scene_cache(text, text, text)',
    'enqueue_job(text, text, jsonb, integer, integer, integer, text)',
    'store_account_credential(bigint, text, bytea, bytea)',
    'rewrap_account_credentials(text, text, jsonb)',
    'upsert_dimension(text, text, jsonb, boolean)',
    'set_dimensions_active(text[])',
    'upsert_dimension_account(text, text, text, integer, boolean, text)',
    'set_dimension_accounts_active(text, jsonb)',
    'rollback_param_set(text, text)',
    'rearm_paid_calls(text, date, text)',
    -- The generic attempt ledger is driven from inside the phase RPCs (begin_paid_call,
    -- begin_upload, ...), which derive the dimension from their rows; taken alone, these accept
    -- any live lock token, so they are left to the operator (settling an attempt by hand).
    'record_attempt(text, text, text, text, jsonb, bigint, integer)',
    'finish_attempt(bigint, text, jsonb, bigint)',
    'reconcile_attempt(bigint, text, jsonb, bigint, timestamptz)'
  ] LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION mdame.%s FROM mdame_app', v_function);
    EXECUTE format('GRANT EXECUTE ON FUNCTION mdame.%s TO mdame_admin', v_function);
  END LOOP;
END
$$;

-- The internal helpers (_name) and trigger functions are called by the owner's RPCs and by
-- triggers, never by the app itself.
DO $$
DECLARE
  v_function regprocedure;
BEGIN
  FOR v_function IN SELECT p.oid::regprocedure FROM pg_proc p
                     WHERE p.pronamespace = 'mdame'::regnamespace
                       AND (p.proname LIKE '\_%' OR p.prorettype = 'trigger'::regtype)
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM mdame_app', v_function);
  END LOOP;
END
$$;

-- =============================================================================================
-- The pipeline's metered list calls: the same ledger, fenced by the account's dimension.
-- =============================================================================================
CREATE FUNCTION mdame._account_dimension(p_account_id bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_dimension bigint;
BEGIN
  SELECT dimension_id INTO v_dimension FROM mdame.dimension_accounts WHERE id = p_account_id;
  IF v_dimension IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', coalesce(p_account_id::text, 'NULL'));
  END IF;
  RETURN v_dimension;
END
$$;

CREATE FUNCTION mdame._quota_key_dimension(p_quota_key text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_account bigint;
BEGIN
  SELECT account_id INTO v_account FROM mdame.quota_ledger
   WHERE quota_key = mdame._require_text('quota_key', p_quota_key);
  IF v_account IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no quota reservation for quota_key %s', mdame._clip(p_quota_key));
  END IF;
  RETURN mdame._account_dimension(v_account);
END
$$;

CREATE FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer,
                                           p_quota_key text, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._account_dimension(p_account_id), p_lock_token);
  RETURN mdame.reserve_bucket_quota(p_account_id, p_bucket, p_units, p_quota_key);
END
$$;

CREATE FUNCTION mdame.commit_quota(p_quota_key text, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._quota_key_dimension(p_quota_key), p_lock_token);
  RETURN mdame.commit_quota(p_quota_key);
END
$$;

CREATE FUNCTION mdame.release_quota(p_quota_key text, p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence(mdame._quota_key_dimension(p_quota_key), p_lock_token);
  RETURN mdame.release_quota(p_quota_key);
END
$$;

-- A clip stage that finds a cache entry's file gone or altered drops the entry. The cache is
-- shared by every dimension, so the fence is a live pipeline lock, and the entry is dropped only
-- if it still names the uri the caller checked.
CREATE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text,
                                             p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._fence_token(p_lock_token);
  RETURN mdame.invalidate_scene_cache(p_scene_hash, p_uri, p_reason);
END
$$;

-- A GPU worker holds no pipeline lock but the lease of the job that makes the scene: it may drop
-- that scene's entry, and no other.
CREATE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text,
                                             p_job_id bigint, p_worker_id text, p_attempt integer)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_job jobs;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt);
  SELECT * INTO v_job FROM jobs
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id
     AND attempt = p_attempt
     FOR SHARE;
  IF v_job.id IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF v_job.payload ->> 'scene_hash' IS DISTINCT FROM p_scene_hash THEN
    PERFORM mdame._invalid(format('job %s makes scene %s, not %s', p_job_id,
                                  mdame._clip(v_job.payload ->> 'scene_hash', 80),
                                  mdame._clip(p_scene_hash, 80)));
  END IF;
  RETURN mdame.invalidate_scene_cache(p_scene_hash, p_uri, p_reason);
END
$$;

GRANT EXECUTE ON FUNCTION
  reserve_bucket_quota(bigint, text, integer, text, bigint),
  commit_quota(text, bigint),
  release_quota(text, bigint),
  invalidate_scene_cache(text, text, text, bigint),
  invalidate_scene_cache(text, text, text, bigint, text, integer)
TO mdame_app;

-- =============================================================================================
-- The dimension of new work comes from the rows it refers to, never from the caller's word:
-- a payload's dimension_id, script_id, topic_id, trend_id, render_id and account_id must all
-- agree, and each must exist.
-- =============================================================================================
CREATE OR REPLACE FUNCTION mdame._payload_dimension(p_kind text, p_payload jsonb) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_dimension bigint;
  v_found bigint;
  v_script bigint;
  v_render_script bigint;
  v_ref text;
  v_first text;
BEGIN
  FOREACH v_ref IN ARRAY ARRAY['script_id', 'topic_id', 'trend_id', 'render_id', 'account_id',
                               'dimension_id'] LOOP
    CONTINUE WHEN NOT p_payload ? v_ref OR jsonb_typeof(p_payload -> v_ref) = 'null';
    v_found := CASE v_ref
      WHEN 'script_id' THEN mdame._unit_dimension('script', (p_payload ->> v_ref)::bigint)
      WHEN 'topic_id' THEN mdame._unit_dimension('topic', (p_payload ->> v_ref)::bigint)
      WHEN 'trend_id' THEN mdame._unit_dimension('trend', (p_payload ->> v_ref)::bigint)
      WHEN 'render_id' THEN mdame._unit_dimension('render', (p_payload ->> v_ref)::bigint)
      WHEN 'account_id' THEN mdame._account_dimension((p_payload ->> v_ref)::bigint)
      ELSE (SELECT id FROM mdame.dimensions WHERE id = (p_payload ->> v_ref)::bigint)
    END;
    IF v_found IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006',
        MESSAGE = format('mdame: dimension %s does not exist', (p_payload ->> v_ref)::bigint);
    END IF;
    IF v_dimension IS NOT NULL AND v_found <> v_dimension THEN
      PERFORM mdame._invalid(format(
        'payload for kind %s mixes dimensions: %s %s is of dimension %s, %s %s of dimension %s',
        mdame._clip(p_kind, 80), v_first, (p_payload ->> v_first)::bigint, v_dimension,
        v_ref, (p_payload ->> v_ref)::bigint, v_found));
    END IF;
    v_dimension := v_found;
    v_first := coalesce(v_first, v_ref);
  END LOOP;
  IF v_dimension IS NULL THEN
    PERFORM mdame._invalid(format('payload for kind %s names neither dimension_id nor script_id',
                                  (mdame._work_kind(p_kind)).kind));
  END IF;
  -- A render is published only for its own script.
  IF p_payload ? 'render_id' AND p_payload ? 'script_id' THEN
    v_script := (p_payload ->> 'script_id')::bigint;
    SELECT script_id INTO v_render_script FROM mdame.renders
     WHERE id = (p_payload ->> 'render_id')::bigint;
    IF v_render_script IS DISTINCT FROM v_script THEN
      PERFORM mdame._invalid(format('payload for kind %s: render %s is a render of script %s, '
                                    'not of script %s', mdame._clip(p_kind, 80),
                                    (p_payload ->> 'render_id')::bigint, v_render_script,
                                    v_script));
    END IF;
  END IF;
  RETURN v_dimension;
EXCEPTION
  WHEN invalid_text_representation OR numeric_value_out_of_range THEN
    PERFORM mdame._invalid(format('payload for kind %s has a non-integer %s',
                                  mdame._clip(p_kind, 80), coalesce(v_ref, 'reference')));
    RETURN NULL;
END
$$;

-- =============================================================================================
-- A session URI is a short-lived upload bearer: only resume_upload, fenced by the publication's
-- dimension lock, returns it.
-- =============================================================================================
REVOKE SELECT ON upload_sessions FROM mdame_app;
GRANT SELECT (attempt_id, publication_id, content_sha256, size_bytes, created_at)
  ON upload_sessions TO mdame_app;

-- =============================================================================================
-- A paid call's budget cap comes from the registry, not from the caller.
-- =============================================================================================
CREATE OR REPLACE FUNCTION mdame.begin_paid_call(p_dimension_slug text, p_work_key text, p_provider text, p_request_hash text, p_estimate_micros bigint, p_daily_cap_micros bigint, p_max_attempts integer, p_grace_seconds integer, p_detail jsonb, p_lock_token bigint)
 RETURNS TABLE(action text, attempt_id bigint, budget_key text, period text, result jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_scope text := 'dimension:' || p_dimension_slug;
  v_period text := mdame._paid_period();
  v_last provider_attempts;
  v_billed provider_attempts;
  v_refusal paid_call_refusals;
  v_failed integer;
  v_key text;
  v_id bigint;
  v_cap bigint;
BEGIN
  PERFORM mdame._fence(v_dimension, p_lock_token);
  PERFORM mdame._require_text('work_key', p_work_key, 400),
          mdame._require_range('estimate_micros', p_estimate_micros, 0, 9223372036854775807),
          mdame._require_range('max_attempts', p_max_attempts, 1, 100),
          mdame._require_json('detail', p_detail);
  -- The cap is the registry's (daily_budget_micros in the dimension's stored config, which
  -- only the admin role writes); a caller may name it, to be told when it is stale, never set it.
  v_cap := (SELECT (config ->> 'daily_budget_micros')::bigint FROM dimensions
             WHERE id = v_dimension);
  IF p_daily_cap_micros IS NOT NULL AND p_daily_cap_micros IS DISTINCT FROM v_cap THEN
    RAISE EXCEPTION USING ERRCODE = 'MD001',
      MESSAGE = format('mdame: daily_cap_micros %s is not dimension %s''s registered cap (%s): '
                       'the cap comes from its YAML (daily_budget_usd) through '
                       '`mdame dimensions sync`', p_daily_cap_micros, p_dimension_slug,
                       coalesce(v_cap::text, 'none'));
  END IF;
  IF v_cap IS NOT NULL THEN
    PERFORM mdame.set_budget_cap(v_scope, v_period, v_cap);
  END IF;
  -- The same lock _record_attempt takes: attempts of one work key are serialised.
  PERFORM pg_advisory_xact_lock(hashtextextended('mdame.provider_attempts:' || p_work_key, 0));
  SELECT * INTO v_last FROM provider_attempts
   WHERE work_key = p_work_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_last.status = 'succeeded' AND v_last.request_hash = p_request_hash
     AND v_last.detail ? 'result' THEN
    RETURN QUERY SELECT 'done'::text, v_last.id, v_last.detail ->> 'budget_key',
                        v_last.detail ->> 'period', v_last.detail -> 'result';
    RETURN;
  END IF;
  IF v_last.status = 'submitted' AND v_last.lease_expires_at > now() THEN
    RETURN QUERY SELECT 'in_flight'::text, v_last.id, v_last.detail ->> 'budget_key',
                        v_last.detail ->> 'period', NULL::jsonb;
    RETURN;
  ELSIF v_last.status IN ('submitted', 'unknown') THEN
    PERFORM mdame._settle_at_estimate(v_last);
  END IF;
  SELECT * INTO v_refusal FROM paid_call_refusals r
   WHERE r.dimension_id = v_dimension AND r.rearmed_at IS NULL
     AND ((r.scope = 'key' AND r.provider = split_part(p_provider, ':', 1))
          OR (r.scope = 'model' AND r.provider = p_provider)
          OR (r.scope = 'request' AND r.work_key = p_work_key
              AND r.request_hash = p_request_hash))
   ORDER BY r.id DESC LIMIT 1;
  IF v_refusal.id IS NOT NULL THEN
    RETURN QUERY SELECT 'refused'::text, v_refusal.attempt_id, NULL::text, v_period,
                        v_refusal.cause || jsonb_build_object(
                          'refusal_id', v_refusal.id, 'scope', v_refusal.scope,
                          'day', v_refusal.day, 'provider', v_refusal.provider);
    RETURN;
  END IF;
  SELECT count(*) INTO v_failed FROM provider_attempts
   WHERE work_key = p_work_key AND status = 'failed'
     AND mdame._paid_failure_class(detail) IN ('unusable', 'blocked');
  IF v_failed >= p_max_attempts THEN
    SELECT * INTO v_billed FROM provider_attempts
     WHERE work_key = p_work_key AND status = 'failed'
       AND mdame._paid_failure_class(detail) IN ('unusable', 'blocked')
     ORDER BY attempt_no DESC LIMIT 1;
    RETURN QUERY SELECT 'attempts_exhausted'::text, v_billed.id, NULL::text, v_period,
                        jsonb_build_object('failures', v_failed,
                                           'error', coalesce(v_billed.detail ->> 'error', 'failed'));
    RETURN;
  END IF;
  v_key := 'paid:' || p_work_key || '#' || (coalesce(v_last.attempt_no, 0) + 1);
  IF mdame.reserve_budget(v_scope, v_period, p_estimate_micros, v_key) IS NULL THEN
    -- One event per dimension and day is enough for alerting.
    IF NOT EXISTS (SELECT FROM events WHERE subject_kind = 'dimension'
                      AND subject_id = v_dimension AND event = 'budget_exhausted'
                      AND detail ->> 'period' = v_period) THEN
      INSERT INTO events (subject_kind, subject_id, event, detail)
      VALUES ('dimension', v_dimension, 'budget_exhausted',
              jsonb_build_object('scope', v_scope, 'period', v_period,
                                 'needed_micros', p_estimate_micros,
                                 'provider', left(p_provider, 100)));
    END IF;
    RETURN QUERY SELECT 'budget_exhausted'::text, NULL::bigint, NULL::text, v_period, NULL::jsonb;
    RETURN;
  END IF;
  v_id := mdame.record_attempt(p_work_key, p_provider, p_request_hash, 'submitted',
                               p_detail || jsonb_build_object(
                                 'budget_key', v_key, 'scope', v_scope, 'period', v_period,
                                 'dimension', p_dimension_slug,
                                 'estimate_micros', p_estimate_micros),
                               p_lock_token, p_grace_seconds);
  RETURN QUERY SELECT 'submit'::text, v_id, v_key, v_period,
                      jsonb_build_object('billed_failures', v_failed);
END
$function$;
