-- Provider attempts and paid provider calls: the attempt and budget ledgers together.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE OR REPLACE FUNCTION mdame.record_attempt(p_work_key text, p_provider text, p_request_hash text, p_status text, p_detail jsonb, p_lock_token bigint, p_grace_seconds integer DEFAULT 0)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_lock system_locks := mdame._fence_token(p_lock_token);
  v_id bigint;
BEGIN
  PERFORM mdame._require_range('grace_seconds', p_grace_seconds, 0, 86400);
  v_id := mdame._record_attempt(p_work_key, p_provider, p_request_hash, p_status, p_detail);
  UPDATE provider_attempts
     SET lock_token = v_lock.token, lease_grace_seconds = p_grace_seconds,
         lease_expires_at = v_lock.expires_at + p_grace_seconds * interval '1 second'
   WHERE id = v_id;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_attempt(p_work_key text, p_provider text, p_request_hash text, p_status text, p_detail jsonb, p_lock_token bigint, p_grace_seconds integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_attempt(p_work_key text, p_provider text, p_request_hash text, p_status text, p_detail jsonb, p_lock_token bigint, p_grace_seconds integer) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame._lock_attempt(p_attempt_id bigint)
 RETURNS mdame.provider_attempts
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_attempt mdame.provider_attempts;
BEGIN
  SELECT * INTO v_attempt FROM mdame.provider_attempts
   WHERE id = mdame._require_not_null('attempt_id', p_attempt_id) FOR UPDATE;
  IF v_attempt.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: provider attempt %s does not exist', p_attempt_id);
  END IF;
  RETURN v_attempt;
END
$function$;
REVOKE ALL ON FUNCTION mdame._lock_attempt(p_attempt_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame.finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_attempt_holder(p_attempt_id, (mdame._fence_token(p_lock_token)).token,
                                        NULL);
  RETURN mdame._finish_attempt(p_attempt_id, p_status, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb, p_lock_token bigint, p_asked_at timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_attempt_holder(p_attempt_id, (mdame._fence_token(p_lock_token)).token,
                                        p_asked_at);
  RETURN mdame._reconcile_attempt(p_attempt_id, p_final_status, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb, p_lock_token bigint, p_asked_at timestamp with time zone) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb, p_lock_token bigint, p_asked_at timestamp with time zone) TO mdame_admin;

-- Refuses (MD011: a wait, until the lease's end) to let p_token settle an attempt another token
-- submitted while that holder's lease is still running, or when the provider was asked before
-- the lease ended (p_asked_at; NULL when the caller did not ask, e.g. finishing its own attempt).
-- p_token is a lock's public token, as the fences return it, never a caller's secret.
CREATE OR REPLACE FUNCTION mdame._require_attempt_holder(p_attempt_id bigint, p_token bigint, p_asked_at timestamp with time zone)
 RETURNS mdame.provider_attempts
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_attempt mdame.provider_attempts := mdame._lock_attempt(p_attempt_id);
BEGIN
  IF v_attempt.lock_token IS NULL OR v_attempt.lock_token = p_token
     OR v_attempt.status NOT IN ('submitted') THEN
    RETURN v_attempt;
  END IF;
  IF v_attempt.lease_expires_at > now() OR p_asked_at IS NULL
     OR p_asked_at < v_attempt.lease_expires_at THEN
    -- MD011, a wait: the caller learns until when (DETAIL, ISO 8601) and comes back then.
    RAISE EXCEPTION USING ERRCODE = 'MD011',
      MESSAGE = format('mdame: attempt %s was submitted under lock token %s, whose lease runs '
                       'until %s: settle it after that, from an answer asked after it',
                       p_attempt_id, v_attempt.lock_token, v_attempt.lease_expires_at),
      DETAIL = to_char(v_attempt.lease_expires_at AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"');
  END IF;
  RETURN v_attempt;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_attempt_holder(p_attempt_id bigint, p_token bigint, p_asked_at timestamp with time zone) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._paid_period()
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  SELECT to_char((now() AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD')
$function$;
REVOKE ALL ON FUNCTION mdame._paid_period() FROM PUBLIC, mdame_app, mdame_admin;

-- An unsettled attempt settled at its estimate is a transient failure (it may have been billed).
CREATE OR REPLACE FUNCTION mdame._settle_at_estimate(p_attempt mdame.provider_attempts)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_key text := p_attempt.detail ->> 'budget_key';
  v_entry mdame.budget_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.budget_ledger WHERE attempt_key = v_key FOR UPDATE;
  IF v_entry.state = 'reserved' THEN
    PERFORM mdame.settle_budget(v_key, v_entry.reserved_micros);
  END IF;
  PERFORM mdame._reconcile_attempt(p_attempt.id, 'failed',
    jsonb_build_object('settled_at_estimate', v_entry.reserved_micros,
                       'failure_class', 'transient',
                       'reason', 'outcome unknown; an LLM call cannot be looked up'));
  INSERT INTO mdame.events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('provider_attempt', p_attempt.id, 'settled_at_estimate', p_attempt.status, 'failed',
          jsonb_build_object('budget_key', v_key, 'micros', v_entry.reserved_micros));
  RETURN coalesce(v_entry.reserved_micros, 0);
END
$function$;
REVOKE ALL ON FUNCTION mdame._settle_at_estimate(p_attempt mdame.provider_attempts) FROM PUBLIC, mdame_app, mdame_admin;

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
  PERFORM mdame._paid_fence(v_dimension, p_lock_token);
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
  -- A work key is one dimension's: this holder neither reuses, settles nor continues the
  -- attempts another dimension (or an upload) made under it.
  IF EXISTS (SELECT FROM provider_attempts a
              WHERE a.work_key = p_work_key
                AND (a.detail ->> 'dimension') IS DISTINCT FROM p_dimension_slug) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: work key %s has attempts that are not dimension %s''s paid calls',
                       mdame._clip(p_work_key, 200), p_dimension_slug);
  END IF;
  SELECT * INTO v_last FROM provider_attempts
   WHERE work_key = p_work_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_last.status = 'succeeded' AND v_last.request_hash = p_request_hash
     AND v_last.detail ? 'result' THEN
    RETURN QUERY SELECT 'done'::text, v_last.id, v_last.detail ->> 'budget_key',
                        v_last.detail ->> 'period', v_last.detail -> 'result';
    RETURN;
  END IF;
  IF v_last.status = 'submitted' AND v_last.lease_expires_at > now() THEN
    -- Until when: the caller waits for the lease's end instead of failing (a killed run's call).
    RETURN QUERY SELECT 'in_flight'::text, v_last.id, v_last.detail ->> 'budget_key',
                        v_last.detail ->> 'period',
                        jsonb_build_object('until', v_last.lease_expires_at);
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
REVOKE ALL ON FUNCTION mdame.begin_paid_call(p_dimension_slug text, p_work_key text, p_provider text, p_request_hash text, p_estimate_micros bigint, p_daily_cap_micros bigint, p_max_attempts integer, p_grace_seconds integer, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.begin_paid_call(p_dimension_slug text, p_work_key text, p_provider text, p_request_hash text, p_estimate_micros bigint, p_daily_cap_micros bigint, p_max_attempts integer, p_grace_seconds integer, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- The attempt, locked, after the fence of its dimension and the holder check.
CREATE OR REPLACE FUNCTION mdame._paid_attempt(p_attempt_id bigint, p_lock_token bigint)
 RETURNS mdame.provider_attempts
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_attempt mdame.provider_attempts;
  v_token bigint;
BEGIN
  PERFORM mdame._fence_token(p_lock_token);  -- a stale token is refused before anything else
  v_attempt := mdame._lock_attempt(p_attempt_id);
  IF NOT v_attempt.detail ? 'budget_key' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: attempt %s is not a paid call', p_attempt_id);
  END IF;
  v_token := mdame._paid_fence(mdame._dimension_id(v_attempt.detail ->> 'dimension'), p_lock_token);
  RETURN mdame._require_attempt_holder(p_attempt_id, v_token, NULL);
END
$function$;
REVOKE ALL ON FUNCTION mdame._paid_attempt(p_attempt_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- The provider answered (HTTP 200): settle at the actual cost and finish the attempt
-- (p_status succeeded, or failed for a billed but unusable answer, classed 'blocked' for a safety
-- block, else 'unusable'). An actual above the reservation is settled as far as the cap allows;
-- the rest is recorded on the attempt and in a 'budget_overrun' event (the cap is never exceeded,
-- and the overrun is never silent). Repeating it is a no-op. Returns the micros settled.
CREATE OR REPLACE FUNCTION mdame.settle_paid_call(p_attempt_id bigint, p_status text, p_actual_micros bigint, p_detail jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts := mdame._paid_attempt(p_attempt_id, p_lock_token);
  v_key text := v_attempt.detail ->> 'budget_key';
  v_entry budget_ledger;
  v_cap bigint;
  v_used bigint;
  v_settle bigint;
  v_class jsonb := '{}';
BEGIN
  PERFORM mdame._require_one_of('status', p_status, ARRAY['succeeded', 'failed']),
          mdame._require_range('actual_micros', p_actual_micros, 0, 9223372036854775807),
          mdame._require_json('detail', p_detail);
  SELECT * INTO v_entry FROM budget_ledger WHERE attempt_key = v_key;
  IF v_attempt.status = p_status AND v_entry.state = 'settled' THEN
    RETURN v_entry.actual_micros;
  END IF;
  IF p_status = 'failed' THEN
    v_class := jsonb_build_object('failure_class',
      CASE WHEN p_detail -> 'blocked' = 'true'::jsonb THEN 'blocked' ELSE 'unusable' END);
  END IF;
  SELECT cap_micros INTO v_cap FROM budget_caps
   WHERE scope = v_entry.scope AND period = v_entry.period FOR NO KEY UPDATE;
  SELECT coalesce(sum(CASE state WHEN 'reserved' THEN reserved_micros
                                 WHEN 'settled' THEN actual_micros ELSE 0 END), 0)
    INTO v_used FROM budget_ledger
   WHERE scope = v_entry.scope AND period = v_entry.period AND id <> v_entry.id;
  v_settle := least(p_actual_micros, greatest(v_entry.reserved_micros, v_cap - v_used));
  PERFORM mdame.settle_budget(v_key, v_settle);
  IF v_settle < p_actual_micros THEN
    INSERT INTO events (subject_kind, subject_id, event, detail)
    VALUES ('provider_attempt', p_attempt_id, 'budget_overrun',
            jsonb_build_object('budget_key', v_key, 'actual_micros', p_actual_micros,
                               'settled_micros', v_settle));
  END IF;
  PERFORM mdame._finish_attempt(p_attempt_id, p_status,
    p_detail || v_class || jsonb_build_object('actual_micros', p_actual_micros,
                                              'settled_micros', v_settle,
                                              'overrun_micros', p_actual_micros - v_settle));
  RETURN v_settle;
END
$function$;
REVOKE ALL ON FUNCTION mdame.settle_paid_call(p_attempt_id bigint, p_status text, p_actual_micros bigint, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.settle_paid_call(p_attempt_id bigint, p_status text, p_actual_micros bigint, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- A definite refusal or nothing sent: the reservation is released and the attempt failed.
-- Nothing was billed (a 429/5xx, or nothing sent), so the failure is transient. Repeating it is
-- a no-op. Returns whether something was released.
CREATE OR REPLACE FUNCTION mdame.release_paid_call(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts := mdame._paid_attempt(p_attempt_id, p_lock_token);
  v_released boolean;
BEGIN
  PERFORM mdame._require_json('detail', p_detail);
  v_released := mdame.release_budget(v_attempt.detail ->> 'budget_key');
  PERFORM mdame._finish_attempt(p_attempt_id, 'failed',
    p_detail || '{"released": true, "failure_class": "transient"}');
  RETURN v_released;
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_paid_call(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_paid_call(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- No answer after the request was sent: the attempt is 'unknown' and its reservation stays
-- held; the next begin_paid_call of the work key settles it at the estimate. Returns the status.
CREATE OR REPLACE FUNCTION mdame.mark_paid_call_unknown(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._paid_attempt(p_attempt_id, p_lock_token);
  PERFORM mdame._require_json('detail', p_detail);
  RETURN mdame._finish_attempt(p_attempt_id, 'unknown', p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.mark_paid_call_unknown(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.mark_paid_call_unknown(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- A failed attempt's class: the recorded one, else derived from what older code stored.
CREATE OR REPLACE FUNCTION mdame._paid_failure_class(p_detail jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE
    WHEN p_detail ? 'failure_class' THEN p_detail ->> 'failure_class'
    WHEN p_detail ? 'settled_at_estimate' THEN 'transient'
    WHEN p_detail -> 'blocked' = 'true'::jsonb THEN 'blocked'
    WHEN jsonb_typeof(p_detail -> 'code') = 'number' THEN
      CASE WHEN (p_detail ->> 'code')::numeric IN (408, 429, 499)
                OR (p_detail ->> 'code')::numeric >= 500 THEN 'transient'
           ELSE 'permanent' END
    WHEN p_detail ? 'released' THEN 'transient'
    WHEN p_detail ->> 'error' LIKE 'not sent:%' OR p_detail ->> 'error' LIKE 'no answer:%'
      THEN 'transient'
    ELSE 'unusable'
  END
$function$;
REVOKE ALL ON FUNCTION mdame._paid_failure_class(p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- A permanent refusal (400, 401/403, 404): nothing billed, so the reservation is released; the
-- attempt fails as 'permanent' and a refusal of p_scope is recorded with p_cause (the provider's
-- status and message, and the fix), which begin_paid_call answers until it is re-armed.
-- Repeating it returns the same refusal. Returns (refusal_id, fresh).
CREATE OR REPLACE FUNCTION mdame.refuse_paid_call(p_attempt_id bigint, p_scope text, p_cause jsonb, p_lock_token bigint)
 RETURNS TABLE(refusal_id bigint, fresh boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts := mdame._paid_attempt(p_attempt_id, p_lock_token);
  v_provider text;
  v_id bigint;
BEGIN
  PERFORM mdame._require_one_of('scope', p_scope, ARRAY['request', 'model', 'key']),
          mdame._require_json('cause', p_cause);
  IF length(p_cause::text) > 8000 THEN
    PERFORM mdame._invalid('cause must be at most 8000 characters of JSON');
  END IF;
  SELECT r.id INTO v_id FROM paid_call_refusals r WHERE r.attempt_id = p_attempt_id;
  IF v_id IS NOT NULL THEN
    RETURN QUERY SELECT v_id, false;
    RETURN;
  END IF;
  PERFORM mdame.release_budget(v_attempt.detail ->> 'budget_key');
  PERFORM mdame._finish_attempt(p_attempt_id, 'failed',
    p_cause || '{"released": true, "failure_class": "permanent"}');
  v_provider := CASE p_scope WHEN 'key' THEN split_part(v_attempt.provider, ':', 1)
                             ELSE v_attempt.provider END;
  INSERT INTO paid_call_refusals (dimension_id, scope, provider, work_key, request_hash,
                                  attempt_id, cause, day)
  VALUES (mdame._dimension_id(v_attempt.detail ->> 'dimension'), p_scope, v_provider,
          v_attempt.work_key, v_attempt.request_hash, p_attempt_id, p_cause,
          (now() AT TIME ZONE 'UTC')::date)
  RETURNING id INTO v_id;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('provider_attempt', p_attempt_id, 'paid_call_refused', 'submitted', 'failed',
          jsonb_build_object('refusal_id', v_id, 'scope', p_scope, 'provider', v_provider));
  RETURN QUERY SELECT v_id, true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.refuse_paid_call(p_attempt_id bigint, p_scope text, p_cause jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.refuse_paid_call(p_attempt_id bigint, p_scope text, p_cause jsonb, p_lock_token bigint) TO mdame_app;

-- The operator's re-arm once the configuration is fixed: every open refusal of the dimension
-- (refused on p_day, when given) is lifted, so the next run sends its request again. Not fenced:
-- it runs from the CLI, outside any partition's lock. Returns the refusals re-armed.
CREATE OR REPLACE FUNCTION mdame.rearm_paid_calls(p_dimension_slug text, p_day date, p_reason text)
 RETURNS TABLE(refusal_id bigint, scope text, provider text, work_key text, day date, cause jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  RETURN QUERY
  WITH lifted AS (
    UPDATE paid_call_refusals r SET rearmed_at = now(), rearm_reason = p_reason
     WHERE r.dimension_id = v_dimension AND r.rearmed_at IS NULL
       AND (p_day IS NULL OR r.day = p_day)
    RETURNING r.id, r.scope, r.provider, r.work_key, r.day, r.cause, r.attempt_id
  ), logged AS (
    INSERT INTO events (subject_kind, subject_id, event, detail)
    SELECT 'provider_attempt', l.attempt_id, 'paid_call_rearmed',
           jsonb_build_object('refusal_id', l.id, 'reason', p_reason)
      FROM lifted l
  )
  SELECT l.id, l.scope, l.provider, l.work_key, l.day, l.cause FROM lifted l ORDER BY l.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.rearm_paid_calls(p_dimension_slug text, p_day date, p_reason text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.rearm_paid_calls(p_dimension_slug text, p_day date, p_reason text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.settle_orphaned_paid_calls(p_dimension_slug text, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts;
  v_count integer := 0;
BEGIN
  PERFORM mdame._fence(mdame._dimension_id(p_dimension_slug), p_lock_token);
  FOR v_attempt IN
    SELECT * FROM provider_attempts
     WHERE detail ? 'budget_key' AND detail ->> 'dimension' = p_dimension_slug
       AND status IN ('submitted', 'unknown')
       AND coalesce(lease_expires_at, '-infinity') <= now()
     ORDER BY id
     FOR UPDATE
  LOOP
    PERFORM mdame._settle_at_estimate(v_attempt);
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$function$;
REVOKE ALL ON FUNCTION mdame.settle_orphaned_paid_calls(p_dimension_slug text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.settle_orphaned_paid_calls(p_dimension_slug text, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts;
BEGIN
  PERFORM mdame._require_one_of('status', p_status, ARRAY['unknown', 'succeeded', 'failed']),
          mdame._require_json('detail', p_detail);
  v_attempt := mdame._lock_attempt(p_attempt_id);
  IF v_attempt.status = p_status THEN
    RETURN p_status;
  ELSIF v_attempt.status <> 'submitted' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: provider attempt %s is %s, not submitted', p_attempt_id, v_attempt.status);
  END IF;
  UPDATE provider_attempts SET status = p_status, detail = detail || p_detail, updated_at = now()
   WHERE id = p_attempt_id;
  RETURN p_status;
END
$function$;
REVOKE ALL ON FUNCTION mdame._finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_attempt provider_attempts;
BEGIN
  PERFORM mdame._require_one_of('final_status', p_final_status, ARRAY['succeeded', 'failed']),
          mdame._require_json('detail', p_detail);
  v_attempt := mdame._lock_attempt(p_attempt_id);
  IF v_attempt.status = p_final_status THEN
    RETURN p_final_status;
  ELSIF v_attempt.status NOT IN ('unknown', 'submitted') THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: provider attempt %s is already %s', p_attempt_id, v_attempt.status);
  END IF;
  UPDATE provider_attempts
     SET status = p_final_status,
         detail = detail || p_detail || jsonb_build_object('reconciled_from', v_attempt.status),
         updated_at = now()
   WHERE id = p_attempt_id;
  RETURN p_final_status;
END
$function$;
REVOKE ALL ON FUNCTION mdame._reconcile_attempt(p_attempt_id bigint, p_final_status text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._record_attempt(p_work_key text, p_provider text, p_request_hash text, p_status text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_last provider_attempts;
  v_id bigint;
BEGIN
  PERFORM mdame._require_text('work_key', p_work_key), mdame._require_text('provider', p_provider, 100),
          mdame._require_text('request_hash', p_request_hash, 128),
          mdame._require_one_of('status', p_status, ARRAY['submitted', 'unknown', 'succeeded', 'failed']),
          mdame._require_json('detail', p_detail);
  -- Serialise attempts of one work key so attempt_no is gap-free and the check below is sound.
  PERFORM pg_advisory_xact_lock(hashtextextended('mdame.provider_attempts:' || p_work_key, 0));
  SELECT * INTO v_last FROM provider_attempts
   WHERE work_key = p_work_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_last.status IN ('submitted', 'unknown') THEN
    RAISE EXCEPTION USING ERRCODE = 'MD005',
      MESSAGE = format('mdame: attempt %s (#%s) for work key %L is still %s: reconcile_attempt it '
                       'before a new attempt', v_last.id, v_last.attempt_no, p_work_key, v_last.status);
  END IF;
  INSERT INTO provider_attempts (work_key, attempt_no, provider, request_hash, status, detail)
  VALUES (p_work_key, coalesce(v_last.attempt_no, 0) + 1, p_provider, p_request_hash, p_status,
          p_detail)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._record_attempt(p_work_key text, p_provider text, p_request_hash text, p_status text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;
