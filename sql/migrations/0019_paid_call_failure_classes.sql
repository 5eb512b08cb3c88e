-- 0019: paid calls tell a transient failure from a permanent refusal.
--
-- Every failed paid attempt has a failure class (detail.failure_class):
--   transient  429, 5xx, nothing sent, or no answer (settled at the estimate): never counted
--              against the work key's cap, so an outage of any length heals once the provider
--              answers again;
--   unusable   a billed answer that could not be used (bad JSON, schema, length, language);
--   blocked    a billed safety block;
--   permanent  a refusal (400, 401/403, 404): released, and recorded in paid_call_refusals so
--              no later run sends the request again until an operator re-arms it.
-- Only billed failures (unusable, blocked) count toward begin_paid_call's p_max_attempts.
-- Attempts recorded before this migration have no class: _paid_failure_class derives it from
-- their detail, so work keys that transient failures exhausted are callable again.
--
-- A refusal's scope follows its cause: 'key' (401/403: every call of the provider family for
-- the dimension), 'model' (404: every call of that model), 'request' (other 4xx: that work key
-- and request hash). begin_paid_call answers 'refused' with the stored cause for a match, and
-- rearm_paid_calls (the operator's `mdame calls retry`) lifts them.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE TABLE paid_call_refusals (
  id            bigserial PRIMARY KEY,
  dimension_id  bigint NOT NULL REFERENCES dimensions (id),
  scope         text NOT NULL CHECK (scope IN ('request', 'model', 'key')),
  provider      text NOT NULL CHECK (length(provider) BETWEEN 1 AND 100),
  work_key      text NOT NULL CHECK (length(work_key) BETWEEN 1 AND 512),
  request_hash  text NOT NULL CHECK (length(request_hash) BETWEEN 1 AND 128),
  attempt_id    bigint NOT NULL REFERENCES provider_attempts (id),
  cause         jsonb NOT NULL CHECK (jsonb_typeof(cause) = 'object'),
  day           date NOT NULL,  -- the UTC day it was refused (`mdame calls retry --day`)
  created_at    timestamptz NOT NULL DEFAULT now(),
  rearmed_at    timestamptz,
  rearm_reason  text CHECK (length(rearm_reason) <= 2000)
);
CREATE INDEX paid_call_refusals_open ON paid_call_refusals (dimension_id) WHERE rearmed_at IS NULL;
GRANT SELECT ON mdame.paid_call_refusals TO mdame_app;
ALTER TABLE mdame.paid_call_refusals ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON mdame.paid_call_refusals FOR SELECT TO mdame_app USING (true);

-- An alert cause for a refused paid call.
ALTER TABLE alerts DROP CONSTRAINT alerts_cause_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_cause_check
  CHECK (cause IN ('run_failure', 'halt', 'reauth_needed', 'budget_cap', 'quota_exhausted',
                   'check_blocked', 'disk_low', 'provider_refused'));

CREATE OR REPLACE FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date,
                                              p_text text, p_lease_s integer DEFAULT 120)
RETURNS TABLE (alert_id bigint, fresh boolean, deliver boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_slug text := coalesce(p_dimension_slug, '');
  v_id bigint;
  v_fresh boolean;
  v_claimed integer;
BEGIN
  IF v_slug <> '' THEN
    PERFORM mdame._require_match('dimension_slug', v_slug, '^[a-z][a-z0-9_-]{1,39}$');
  END IF;
  IF p_cause IS NULL OR p_cause NOT IN ('run_failure', 'halt', 'reauth_needed', 'budget_cap',
                                        'quota_exhausted', 'check_blocked', 'disk_low',
                                        'provider_refused') THEN
    PERFORM mdame._invalid(format('unknown alert cause %s', coalesce(p_cause, 'NULL')));
  END IF;
  IF p_day IS NULL THEN
    PERFORM mdame._invalid('day must not be NULL');
  END IF;
  PERFORM mdame._require_text('text', p_text, 20000), mdame._require_alert_lease(p_lease_s);
  INSERT INTO alerts AS a (dimension_slug, cause, day, text, claimed_until)
  VALUES (v_slug, p_cause, p_day, p_text, now() + make_interval(secs => p_lease_s))
  ON CONFLICT (dimension_slug, cause, day) DO UPDATE
    SET occurrences = a.occurrences + 1, last_seen_at = now()
  RETURNING a.id, (a.xmax = 0) INTO v_id, v_fresh;
  IF v_fresh THEN
    RETURN QUERY SELECT v_id, true, true;
    RETURN;
  END IF;
  UPDATE alerts a SET claimed_until = now() + make_interval(secs => p_lease_s)
   WHERE a.id = v_id AND a.delivered_at IS NULL AND a.attempts > 0
     AND (a.claimed_until IS NULL OR a.claimed_until < now());
  GET DIAGNOSTICS v_claimed = ROW_COUNT;
  RETURN QUERY SELECT v_id, false, v_claimed > 0;
END
$$;

-- A failed attempt's class: the recorded one, else derived from what older code stored.
CREATE FUNCTION mdame._paid_failure_class(p_detail jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
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
$$;

-- An unsettled attempt settled at its estimate is a transient failure (it may have been billed).
CREATE OR REPLACE FUNCTION mdame._settle_at_estimate(p_attempt mdame.provider_attempts)
RETURNS bigint
LANGUAGE plpgsql AS $$
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
$$;

-- As in 0008, plus: an open refusal matching the call answers 'refused' (result: the stored
-- cause), and only billed failures count toward p_max_attempts ('attempts_exhausted' carries
-- the last one's error and the count in result; 'submit' the count so far).
CREATE OR REPLACE FUNCTION mdame.begin_paid_call(p_dimension_slug text, p_work_key text,
                                                 p_provider text, p_request_hash text,
                                                 p_estimate_micros bigint,
                                                 p_daily_cap_micros bigint,
                                                 p_max_attempts integer, p_grace_seconds integer,
                                                 p_detail jsonb, p_lock_token bigint)
RETURNS TABLE (action text, attempt_id bigint, budget_key text, period text, result jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
BEGIN
  PERFORM mdame._fence(v_dimension, p_lock_token);
  PERFORM mdame._require_text('work_key', p_work_key, 400),
          mdame._require_range('estimate_micros', p_estimate_micros, 0, 9223372036854775807),
          mdame._require_range('max_attempts', p_max_attempts, 1, 100),
          mdame._require_json('detail', p_detail);
  IF p_daily_cap_micros IS NOT NULL THEN
    PERFORM mdame.set_budget_cap(v_scope, v_period, p_daily_cap_micros);
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
$$;

-- As in 0008; a failed settle is classed 'blocked' (a safety block) or 'unusable'.
CREATE OR REPLACE FUNCTION mdame.settle_paid_call(p_attempt_id bigint, p_status text,
                                                  p_actual_micros bigint, p_detail jsonb,
                                                  p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- As in 0008: nothing was billed (a 429/5xx, or nothing sent), so the failure is transient.
CREATE OR REPLACE FUNCTION mdame.release_paid_call(p_attempt_id bigint, p_detail jsonb,
                                                   p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- A permanent refusal (400, 401/403, 404): nothing billed, so the reservation is released; the
-- attempt fails as 'permanent' and a refusal of p_scope is recorded with p_cause (the provider's
-- status and message, and the fix), which begin_paid_call answers until it is re-armed.
-- Repeating it returns the same refusal. Returns (refusal_id, fresh).
CREATE FUNCTION mdame.refuse_paid_call(p_attempt_id bigint, p_scope text, p_cause jsonb,
                                       p_lock_token bigint)
RETURNS TABLE (refusal_id bigint, fresh boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- The operator's re-arm once the configuration is fixed: every open refusal of the dimension
-- (refused on p_day, when given) is lifted, so the next run sends its request again. Not fenced:
-- it runs from the CLI, outside any partition's lock. Returns the refusals re-armed.
CREATE FUNCTION mdame.rearm_paid_calls(p_dimension_slug text, p_day date, p_reason text)
RETURNS TABLE (refusal_id bigint, scope text, provider text, work_key text, day date,
               cause jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

REVOKE ALL ON FUNCTION mdame._paid_failure_class(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame._paid_failure_class(jsonb) TO mdame_app;
REVOKE ALL ON FUNCTION mdame.refuse_paid_call(bigint, text, jsonb, bigint),
  mdame.rearm_paid_calls(text, date, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.refuse_paid_call(bigint, text, jsonb, bigint),
  mdame.rearm_paid_calls(text, date, text) TO mdame_app;
