-- 0008: paid provider calls (Gemini): the budget ledger and the attempt ledger move together.
--
-- A paid call is four phases, each one transaction:
--   begin_paid_call    settles an earlier call of the same work key whose outcome is unknown
--                      (at its estimate: an LLM call cannot be looked up), then reserves this
--                      call's estimate under the dimension's daily cap and records the attempt
--                      'submitted' with the request's hash. Or answers why not: 'done' (the same
--                      request already succeeded; its stored result comes back, nothing is
--                      paid twice), 'budget_exhausted', 'in_flight', 'attempts_exhausted'.
--   settle_paid_call   the provider answered: the reservation is settled at the actual usage
--                      and the attempt finished (succeeded, or failed for an answer that was
--                      billed but unusable: a safety block, a schema break, bad JSON).
--   release_paid_call  a definite refusal (4xx/5xx, or nothing sent): nothing billed, released.
--   mark_paid_call_unknown  no answer after the request was sent (timeout, dropped
--                      connection): the reservation stays held until a later begin settles it.
-- So at any time: reserved = settled + released + held, where held are exactly the ledger
-- entries of attempts still 'submitted' or 'unknown'.
--
-- Budget scope 'dimension:<slug>', period the UTC day the money is spent (YYYY-MM-DD), not the
-- partition's day: a backfill spends today's budget. The cap comes from the dimension's YAML
-- (daily_budget_usd) and is set by begin_paid_call on every call, so an edited YAML applies at
-- once.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE FUNCTION mdame._paid_period() RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT to_char((now() AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD')
$$;

-- Settles an unsettled attempt at its estimate: the reservation is kept as spent, the attempt
-- becomes 'failed' (its answer is lost, a new attempt may follow). Returns the micros settled.
CREATE FUNCTION mdame._settle_at_estimate(p_attempt mdame.provider_attempts) RETURNS bigint
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
                       'reason', 'outcome unknown; an LLM call cannot be looked up'));
  INSERT INTO mdame.events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('provider_attempt', p_attempt.id, 'settled_at_estimate', p_attempt.status, 'failed',
          jsonb_build_object('budget_key', v_key, 'micros', v_entry.reserved_micros));
  RETURN coalesce(v_entry.reserved_micros, 0);
END
$$;

CREATE FUNCTION mdame.begin_paid_call(p_dimension_slug text, p_work_key text, p_provider text,
                                      p_request_hash text, p_estimate_micros bigint,
                                      p_daily_cap_micros bigint, p_max_attempts integer,
                                      p_grace_seconds integer, p_detail jsonb,
                                      p_lock_token bigint)
RETURNS TABLE (action text, attempt_id bigint, budget_key text, period text, result jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_scope text := 'dimension:' || p_dimension_slug;
  v_period text := mdame._paid_period();
  v_last provider_attempts;
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
  SELECT count(*) INTO v_failed FROM provider_attempts
   WHERE work_key = p_work_key AND status = 'failed';
  IF v_failed >= p_max_attempts THEN
    RETURN QUERY SELECT 'attempts_exhausted'::text, v_last.id, NULL::text, v_period, NULL::jsonb;
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
  RETURN QUERY SELECT 'submit'::text, v_id, v_key, v_period, NULL::jsonb;
END
$$;

-- The attempt, locked, after the fence of its dimension and the holder check.
CREATE FUNCTION mdame._paid_attempt(p_attempt_id bigint, p_lock_token bigint)
RETURNS mdame.provider_attempts
LANGUAGE plpgsql AS $$
DECLARE
  v_attempt mdame.provider_attempts;
BEGIN
  PERFORM mdame._fence_token(p_lock_token);  -- a stale token is refused before anything else
  v_attempt := mdame._lock_attempt(p_attempt_id);
  IF NOT v_attempt.detail ? 'budget_key' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: attempt %s is not a paid call', p_attempt_id);
  END IF;
  PERFORM mdame._fence(mdame._dimension_id(v_attempt.detail ->> 'dimension'), p_lock_token);
  RETURN mdame._require_attempt_holder(p_attempt_id, p_lock_token, NULL);
END
$$;

-- The provider answered (HTTP 200): settle at the actual cost and finish the attempt
-- (p_status succeeded, or failed for a billed but unusable answer). An actual above the
-- reservation is settled as far as the cap allows; the rest is recorded on the attempt and in
-- a 'budget_overrun' event (the cap is never exceeded, and the overrun is never silent).
-- Repeating it is a no-op. Returns the micros settled.
CREATE FUNCTION mdame.settle_paid_call(p_attempt_id bigint, p_status text, p_actual_micros bigint,
                                       p_detail jsonb, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_attempt provider_attempts := mdame._paid_attempt(p_attempt_id, p_lock_token);
  v_key text := v_attempt.detail ->> 'budget_key';
  v_entry budget_ledger;
  v_cap bigint;
  v_used bigint;
  v_settle bigint;
BEGIN
  PERFORM mdame._require_one_of('status', p_status, ARRAY['succeeded', 'failed']),
          mdame._require_range('actual_micros', p_actual_micros, 0, 9223372036854775807),
          mdame._require_json('detail', p_detail);
  SELECT * INTO v_entry FROM budget_ledger WHERE attempt_key = v_key;
  IF v_attempt.status = p_status AND v_entry.state = 'settled' THEN
    RETURN v_entry.actual_micros;
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
    p_detail || jsonb_build_object('actual_micros', p_actual_micros,
                                   'settled_micros', v_settle,
                                   'overrun_micros', p_actual_micros - v_settle));
  RETURN v_settle;
END
$$;

-- A definite refusal or nothing sent: the reservation is released and the attempt failed.
-- Repeating it is a no-op. Returns whether something was released.
CREATE FUNCTION mdame.release_paid_call(p_attempt_id bigint, p_detail jsonb, p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_attempt provider_attempts := mdame._paid_attempt(p_attempt_id, p_lock_token);
  v_released boolean;
BEGIN
  PERFORM mdame._require_json('detail', p_detail);
  v_released := mdame.release_budget(v_attempt.detail ->> 'budget_key');
  PERFORM mdame._finish_attempt(p_attempt_id, 'failed', p_detail || '{"released": true}');
  RETURN v_released;
END
$$;

-- No answer after the request was sent: the attempt is 'unknown' and its reservation stays
-- held; the next begin_paid_call of the work key settles it at the estimate. Returns the status.
CREATE FUNCTION mdame.mark_paid_call_unknown(p_attempt_id bigint, p_detail jsonb,
                                             p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._paid_attempt(p_attempt_id, p_lock_token);
  PERFORM mdame._require_json('detail', p_detail);
  RETURN mdame._finish_attempt(p_attempt_id, 'unknown', p_detail);
END
$$;

-- The helpers are not SECURITY DEFINER: called by the app directly they could change nothing.
REVOKE ALL ON FUNCTION mdame._paid_period(), mdame._settle_at_estimate(mdame.provider_attempts),
  mdame._paid_attempt(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame._paid_period(), mdame._settle_at_estimate(mdame.provider_attempts),
  mdame._paid_attempt(bigint, bigint) TO mdame_app;
REVOKE ALL ON FUNCTION
  mdame.begin_paid_call(text, text, text, text, bigint, bigint, integer, integer, jsonb, bigint),
  mdame.settle_paid_call(bigint, text, bigint, jsonb, bigint),
  mdame.release_paid_call(bigint, jsonb, bigint),
  mdame.mark_paid_call_unknown(bigint, jsonb, bigint)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.begin_paid_call(text, text, text, text, bigint, bigint, integer, integer, jsonb, bigint),
  mdame.settle_paid_call(bigint, text, bigint, jsonb, bigint),
  mdame.release_paid_call(bigint, jsonb, bigint),
  mdame.mark_paid_call_unknown(bigint, jsonb, bigint)
TO mdame_app;
