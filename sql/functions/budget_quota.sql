-- Budgets and quotas: money reserved under a cap and settled; an account's upload quota.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Sets (or changes) the cap of a scope and period. Lowering it below current use is allowed:
-- later reservations then fail. Returns the cap.
CREATE OR REPLACE FUNCTION mdame.set_budget_cap(p_scope text, p_period text, p_cap_micros bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_match('scope', p_scope, '^[A-Za-z0-9][A-Za-z0-9:._/-]{0,199}$'),
          mdame._require_match('period', p_period, '^[A-Za-z0-9][A-Za-z0-9:._-]{0,63}$'),
          mdame._require_range('cap_micros', p_cap_micros, 0, 9223372036854775807);
  INSERT INTO budget_caps AS c (scope, period, cap_micros)
  VALUES (p_scope, p_period, p_cap_micros)
  ON CONFLICT (scope, period) DO UPDATE
    SET cap_micros = excluded.cap_micros, updated_at = now()
    WHERE c.cap_micros <> excluded.cap_micros;
  RETURN p_cap_micros;
END
$function$;
REVOKE ALL ON FUNCTION mdame.set_budget_cap(p_scope text, p_period text, p_cap_micros bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.set_budget_cap(p_scope text, p_period text, p_cap_micros bigint) TO mdame_admin;

-- Atomic check-and-reserve: the ledger id, or NULL when the amount does not fit under the cap.
-- The same attempt_key reserves once: a repeat returns the same id. A key whose reservation was
-- released is reserved afresh on the same row (released -> reserved) when the amount fits, else
-- NULL: the returned id always stands for money that is held.
CREATE OR REPLACE FUNCTION mdame.reserve_budget(p_scope text, p_period text, p_amount_micros bigint, p_attempt_key text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_cap bigint;
  v_used bigint;
  v_id bigint;
  v_state text;
BEGIN
  PERFORM mdame._require_text('scope', p_scope, 200), mdame._require_text('period', p_period, 64),
          mdame._require_range('amount_micros', p_amount_micros, 0, 9223372036854775807),
          mdame._require_text('attempt_key', p_attempt_key);
  -- The cap row is the serialisation point for every change of what counts against the cap
  -- (reserve, re-reserve, settle).
  SELECT cap_micros INTO v_cap FROM budget_caps
   WHERE scope = p_scope AND period = p_period FOR NO KEY UPDATE;
  IF v_cap IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no budget cap set for scope %s period %s', mdame._clip(p_scope),
                       mdame._clip(p_period));
  END IF;
  v_id := mdame._existing_budget_entry(p_attempt_key, p_scope, p_period, p_amount_micros);
  IF v_id IS NOT NULL THEN
    SELECT state INTO v_state FROM budget_ledger WHERE id = v_id FOR UPDATE;
    IF v_state <> 'released' THEN
      RETURN v_id;
    END IF;
  END IF;
  SELECT coalesce(sum(CASE state WHEN 'reserved' THEN reserved_micros
                                 WHEN 'settled' THEN actual_micros ELSE 0 END), 0)
    INTO v_used
    FROM budget_ledger WHERE scope = p_scope AND period = p_period;
  IF v_used + p_amount_micros > v_cap THEN
    RETURN NULL;
  END IF;
  IF v_id IS NOT NULL THEN
    UPDATE budget_ledger SET state = 'reserved', updated_at = now() WHERE id = v_id;
    RETURN v_id;
  END IF;
  INSERT INTO budget_ledger (scope, period, attempt_key, reserved_micros)
  VALUES (p_scope, p_period, p_attempt_key, p_amount_micros)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.reserve_budget(p_scope text, p_period text, p_amount_micros bigint, p_attempt_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reserve_budget(p_scope text, p_period text, p_amount_micros bigint, p_attempt_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame._existing_budget_entry(p_attempt_key text, p_scope text, p_period text, p_amount_micros bigint)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_entry mdame.budget_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.budget_ledger WHERE attempt_key = p_attempt_key;
  IF v_entry.id IS NOT NULL AND (v_entry.scope, v_entry.period, v_entry.reserved_micros)
       IS DISTINCT FROM (p_scope, p_period, p_amount_micros) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: budget attempt_key %s was reserved for %s/%s %s micros',
                       mdame._clip(p_attempt_key), v_entry.scope, v_entry.period,
                       v_entry.reserved_micros);
  END IF;
  RETURN v_entry.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._existing_budget_entry(p_attempt_key text, p_scope text, p_period text, p_amount_micros bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._lock_budget_entry(p_attempt_key text)
 RETURNS mdame.budget_ledger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_entry mdame.budget_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.budget_ledger
   WHERE attempt_key = mdame._require_text('attempt_key', p_attempt_key) FOR UPDATE;
  IF v_entry.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no budget reservation for attempt_key %s', mdame._clip(p_attempt_key));
  END IF;
  RETURN v_entry;
END
$function$;
REVOKE ALL ON FUNCTION mdame._lock_budget_entry(p_attempt_key text) FROM PUBLIC, mdame_app, mdame_admin;

-- Settles a reservation at the actual cost; returns the ledger id. Repeating it with the same
-- amount is a no-op. The ledger records the truth, and the cap is never silently exceeded:
--   - an actual at or below the reserved amount is always accepted (the rest is freed);
--   - an actual above it is accepted only while the whole scope and period, counted with this
--     entry at its actual amount, still fits under the cap; otherwise MD001 naming both amounts
--     and the cap, and nothing changes (the reservation stays held, for the caller to settle at
--     what fits, raise the cap, or escalate).
-- It takes the cap row's lock first, like reserve_budget, so a concurrent reservation cannot
-- slip under the cap between the sum and the update.
CREATE OR REPLACE FUNCTION mdame.settle_budget(p_attempt_key text, p_actual_micros bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_entry budget_ledger;
  v_cap bigint;
  v_used bigint;
BEGIN
  PERFORM mdame._require_range('actual_micros', p_actual_micros, 0, 9223372036854775807),
          mdame._require_text('attempt_key', p_attempt_key);
  SELECT * INTO v_entry FROM budget_ledger WHERE attempt_key = p_attempt_key;
  IF v_entry.id IS NULL THEN
    v_entry := mdame._lock_budget_entry(p_attempt_key);  -- raises MD006
  END IF;
  -- Lock order: cap, then entry (as reserve_budget), so settle and reserve cannot deadlock.
  SELECT cap_micros INTO v_cap FROM budget_caps
   WHERE scope = v_entry.scope AND period = v_entry.period FOR NO KEY UPDATE;
  v_entry := mdame._lock_budget_entry(p_attempt_key);
  IF v_entry.state = 'settled' AND v_entry.actual_micros = p_actual_micros THEN
    RETURN v_entry.id;
  ELSIF v_entry.state <> 'reserved' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: budget attempt_key %s is already %s%s', mdame._clip(p_attempt_key),
                       v_entry.state,
                       CASE WHEN v_entry.state = 'settled'
                            THEN format(' at %s micros', v_entry.actual_micros) ELSE '' END);
  END IF;
  IF p_actual_micros > v_entry.reserved_micros THEN
    SELECT coalesce(sum(CASE state WHEN 'reserved' THEN reserved_micros
                                   WHEN 'settled' THEN actual_micros ELSE 0 END), 0)
      INTO v_used
      FROM budget_ledger
     WHERE scope = v_entry.scope AND period = v_entry.period AND id <> v_entry.id;
    IF v_used + p_actual_micros > v_cap THEN
      RAISE EXCEPTION USING ERRCODE = 'MD001',
        MESSAGE = format('mdame: budget attempt_key %s: actual %s micros exceeds the reserved %s '
                         'micros and does not fit under the cap of %s/%s (%s micros, %s in use '
                         'by other entries); nothing was settled',
                         mdame._clip(p_attempt_key), p_actual_micros, v_entry.reserved_micros,
                         v_entry.scope, v_entry.period, v_cap, v_used);
    END IF;
  END IF;
  UPDATE budget_ledger SET state = 'settled', actual_micros = p_actual_micros, updated_at = now()
   WHERE id = v_entry.id;
  RETURN v_entry.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.settle_budget(p_attempt_key text, p_actual_micros bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.settle_budget(p_attempt_key text, p_actual_micros bigint) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.release_budget(p_attempt_key text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_entry budget_ledger := mdame._lock_budget_entry(p_attempt_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RETURN false;
  ELSIF v_entry.state = 'settled' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: budget attempt_key %s is settled and cannot be released',
                       mdame._clip(p_attempt_key));
  END IF;
  UPDATE budget_ledger SET state = 'released', updated_at = now() WHERE id = v_entry.id;
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_budget(p_attempt_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_budget(p_attempt_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.reserve_quota(p_account_id bigint, p_units integer, p_quota_key text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  RETURN mdame._reserve_quota(p_account_id, 'units', p_units, p_quota_key);
END
$function$;
REVOKE ALL ON FUNCTION mdame.reserve_quota(p_account_id bigint, p_units integer, p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reserve_quota(p_account_id bigint, p_units integer, p_quota_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame._lock_quota_entry(p_quota_key text)
 RETURNS mdame.quota_ledger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_entry mdame.quota_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.quota_ledger
   WHERE quota_key = mdame._require_text('quota_key', p_quota_key) FOR UPDATE;
  IF v_entry.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no quota reservation for quota_key %s', mdame._clip(p_quota_key));
  END IF;
  RETURN v_entry;
END
$function$;
REVOKE ALL ON FUNCTION mdame._lock_quota_entry(p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame.commit_quota(p_quota_key text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_entry quota_ledger := mdame._lock_quota_entry(p_quota_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: quota_key %s was released and cannot be committed',
                       mdame._clip(p_quota_key));
  ELSIF v_entry.state = 'reserved' THEN
    UPDATE quota_ledger SET state = 'committed', updated_at = now() WHERE id = v_entry.id;
  END IF;
  RETURN v_entry.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.commit_quota(p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.commit_quota(p_quota_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.commit_quota(p_quota_key text, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._quota_key_dimension(p_quota_key), p_lock_token);
  RETURN mdame.commit_quota(p_quota_key);
END
$function$;
REVOKE ALL ON FUNCTION mdame.commit_quota(p_quota_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.commit_quota(p_quota_key text, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.release_quota(p_quota_key text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_entry quota_ledger := mdame._lock_quota_entry(p_quota_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RETURN false;
  ELSIF v_entry.state = 'committed' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: quota_key %s is committed and cannot be released',
                       mdame._clip(p_quota_key));
  END IF;
  UPDATE quota_ledger SET state = 'released', updated_at = now() WHERE id = v_entry.id;
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_quota(p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_quota(p_quota_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.release_quota(p_quota_key text, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._quota_key_dimension(p_quota_key), p_lock_token);
  RETURN mdame.release_quota(p_quota_key);
END
$function$;
REVOKE ALL ON FUNCTION mdame.release_quota(p_quota_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.release_quota(p_quota_key text, p_lock_token bigint) TO mdame_app;

-- The account's current quota day.
CREATE OR REPLACE FUNCTION mdame._quota_day(p_quota_timezone text)
 RETURNS date
 LANGUAGE sql
 STABLE
AS $function$
  SELECT (now() AT TIME ZONE p_quota_timezone)::date
$function$;
REVOKE ALL ON FUNCTION mdame._quota_day(p_quota_timezone text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._bucket_cap(p_account mdame.dimension_accounts, p_bucket text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE p_bucket WHEN 'insert' THEN p_account.daily_insert_calls
                       WHEN 'search' THEN p_account.daily_search_calls
                       ELSE p_account.daily_quota_units END
$function$;
REVOKE ALL ON FUNCTION mdame._bucket_cap(p_account mdame.dimension_accounts, p_bucket text) FROM PUBLIC, mdame_app, mdame_admin;

-- Reserves units of one bucket on the account's current quota day (now() in its quota_timezone;
-- the caller's partition date plays no part, so a backfill of many days spends one day's quota
-- per real day). Returns the ledger id, or NULL when the units do not fit that day. The same key
-- reserves once: while held a repeat returns the same id, even after midnight; a released key is
-- reserved afresh on the same row for today.
CREATE OR REPLACE FUNCTION mdame._reserve_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_account dimension_accounts;
  v_day date;
  v_used bigint;
  v_entry quota_ledger;
BEGIN
  PERFORM mdame._require_not_null('account_id', p_account_id),
          mdame._require_one_of('bucket', p_bucket, ARRAY['insert', 'search', 'units']),
          mdame._require_range('units', p_units, 1, 2147483647),
          mdame._require_text('quota_key', p_quota_key);
  SELECT * INTO v_account FROM dimension_accounts WHERE id = p_account_id FOR NO KEY UPDATE;
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  v_day := mdame._quota_day(v_account.quota_timezone);
  SELECT * INTO v_entry FROM quota_ledger WHERE quota_key = p_quota_key FOR UPDATE;
  IF v_entry.id IS NOT NULL THEN
    IF (v_entry.account_id, v_entry.units, v_entry.bucket)
       IS DISTINCT FROM (p_account_id, p_units, p_bucket) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: quota_key %s was reserved for account %s, %s %s units',
                         mdame._clip(p_quota_key), v_entry.account_id, v_entry.units,
                         v_entry.bucket);
    ELSIF v_entry.state <> 'released' THEN
      RETURN v_entry.id;
    END IF;
  END IF;
  SELECT coalesce(sum(units) FILTER (WHERE state <> 'released'), 0) INTO v_used
    FROM quota_ledger WHERE account_id = p_account_id AND day = v_day AND bucket = p_bucket;
  IF v_used + p_units > mdame._bucket_cap(v_account, p_bucket) THEN
    RETURN NULL;
  END IF;
  IF v_entry.id IS NOT NULL THEN
    UPDATE quota_ledger SET state = 'reserved', day = v_day, updated_at = now()
     WHERE id = v_entry.id;
    RETURN v_entry.id;
  END IF;
  INSERT INTO quota_ledger (account_id, day, quota_key, units, bucket)
  VALUES (p_account_id, v_day, p_quota_key, p_units, p_bucket)
  RETURNING id INTO v_entry.id;
  RETURN v_entry.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._reserve_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;

-- Reserves units of one bucket ('insert', 'search' or 'units') of the account's quota day.
CREATE OR REPLACE FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  RETURN mdame._reserve_quota(p_account_id, p_bucket, p_units, p_quota_key);
END
$function$;
REVOKE ALL ON FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._account_dimension(p_account_id), p_lock_token);
  RETURN mdame.reserve_bucket_quota(p_account_id, p_bucket, p_units, p_quota_key);
END
$function$;
REVOKE ALL ON FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer, p_quota_key text, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._quota_key_dimension(p_quota_key text)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._quota_key_dimension(p_quota_key text) FROM PUBLIC, mdame_app, mdame_admin;

-- Takes one call of an account's per-window limit (a platform's calls per minute per creator):
-- 0 when taken (the call recorded now), else the milliseconds until a call leaves the window,
-- nothing taken. The account row's lock puts concurrent takers in line, so no window ever
-- holds more than p_limit calls, whichever process or run takes them.
CREATE OR REPLACE FUNCTION mdame._take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_now timestamptz;
  v_window interval := make_interval(secs => p_window_ms / 1000.0);
  v_count integer;
  v_leaves timestamptz;
BEGIN
  PERFORM mdame._require_match('bucket', p_bucket, '^[a-z][a-z0-9_]{0,39}$'),
          mdame._require_range('limit', p_limit, 1, 100000),
          mdame._require_range('window_ms', p_window_ms, 1, 86400000);
  PERFORM 1 FROM dimension_accounts
   WHERE id = mdame._require_not_null('account_id', p_account_id) FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  -- Read after the lock: a taker that waited for it must not date its call, or judge the
  -- window, by the time before the calls taken meanwhile.
  v_now := clock_timestamp();
  DELETE FROM call_windows
   WHERE account_id = p_account_id AND bucket = p_bucket AND called_at <= v_now - v_window;
  SELECT count(*) INTO v_count
    FROM call_windows WHERE account_id = p_account_id AND bucket = p_bucket;
  IF v_count >= p_limit THEN
    -- The window has room once all but p_limit - 1 of its calls left it.
    SELECT called_at + v_window INTO v_leaves
      FROM call_windows WHERE account_id = p_account_id AND bucket = p_bucket
     ORDER BY called_at OFFSET v_count - p_limit LIMIT 1;
    RETURN greatest(1, ceil(extract(epoch FROM v_leaves - v_now) * 1000))::integer;
  END IF;
  INSERT INTO call_windows (account_id, bucket, called_at) VALUES (p_account_id, p_bucket, v_now);
  RETURN 0;
END
$function$;
REVOKE ALL ON FUNCTION mdame._take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  RETURN mdame._take_call_slot(p_account_id, p_bucket, p_limit, p_window_ms);
END
$function$;
REVOKE ALL ON FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._account_dimension(p_account_id), p_lock_token);
  RETURN mdame._take_call_slot(p_account_id, p_bucket, p_limit, p_window_ms);
END
$function$;
REVOKE ALL ON FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.take_call_slot(p_account_id bigint, p_bucket text, p_limit integer, p_window_ms integer, p_lock_token bigint) TO mdame_app;
