-- 0003: database hardening, ledgers and accounts (issue 7, items 6 and 7).
--
-- - TRUNCATE of mdame.environment is refused (a TRUNCATE bypasses row triggers, and the next
--   migrate would then record its own ENV: a prod database relabelled as dev).
-- - New tables are not readable by the app role by default: a future table of secrets must be
--   granted on purpose. Existing tables keep their explicit grants.
-- - Row-level security on every table, with a SELECT policy for mdame_app only. The owner owns
--   the tables, and the SECURITY DEFINER RPCs run as the owner, so neither is subject to it (no
--   FORCE needed); any other role (a hosted platform's API roles) sees no rows even if granted.
-- - Error messages cut the inputs they echo (mdame._clip).
-- - Budgets: settle_budget locks the cap and bounds an overrun; re-reserving a released key is
--   a fresh reservation of the same row. Quotas: the same, and the quota day is the provider's
--   (the account's quota_timezone), never the caller's partition date.
-- - Accounts can be deactivated by the registry; inactive accounts get no new publication.
-- - Approval needs the caller's whole set of required reviews on exactly this file.
-- - One publication of the same bytes per account.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- =============================================================================================
-- The environment row cannot be truncated away.
-- =============================================================================================
-- environment_is_immutable only raises, so it serves a statement-level trigger as well.
CREATE TRIGGER environment_is_not_truncated
  BEFORE TRUNCATE ON environment
  FOR EACH STATEMENT EXECUTE FUNCTION environment_is_immutable();

-- =============================================================================================
-- Privileges: no SELECT on future tables by default.
-- =============================================================================================
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame
  REVOKE SELECT ON TABLES FROM mdame_app;

-- =============================================================================================
-- Error messages: echoed inputs are cut.
-- =============================================================================================
-- The value quoted as a literal, cut to p_max characters with an ellipsis and its full length,
-- so a 100 kB key cannot turn one error into a 100 kB log line.
CREATE FUNCTION mdame._clip(p_value text, p_max integer DEFAULT 80) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_value IS NULL THEN 'NULL'
    WHEN length(p_value) <= p_max THEN quote_literal(p_value)
    ELSE quote_literal(left(p_value, p_max)) || format('... (%s characters)', length(p_value))
  END
$$;

CREATE OR REPLACE FUNCTION mdame._require_match(p_name text, p_value text, p_pattern text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value !~ p_pattern THEN
    PERFORM mdame._invalid(format('%s %s does not match %s', p_name, mdame._clip(p_value), p_pattern));
  END IF;
  RETURN p_value;
END
$$;

CREATE OR REPLACE FUNCTION mdame._require_one_of(p_name text, p_value text, p_allowed text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR NOT (p_value = ANY (p_allowed)) THEN
    PERFORM mdame._invalid(format('%s must be one of %s (got %s)', p_name,
                            array_to_string(p_allowed, ', '), mdame._clip(p_value)));
  END IF;
  RETURN p_value;
END
$$;

CREATE OR REPLACE FUNCTION mdame._require_sha256(p_name text, p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value !~ '^[0-9a-f]{64}$' THEN
    PERFORM mdame._invalid(format('%s must be a lowercase hex SHA-256 (got %s)', p_name,
                            mdame._clip(p_value)));
  END IF;
  RETURN p_value;
END
$$;

CREATE OR REPLACE FUNCTION mdame._dimension_id(p_slug text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_id bigint;
BEGIN
  SELECT id INTO v_id FROM mdame.dimensions WHERE slug = mdame._require_text('dimension_slug', p_slug, 63);
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: unknown dimension %s', mdame._clip(p_slug));
  END IF;
  RETURN v_id;
END
$$;

CREATE OR REPLACE FUNCTION mdame._work_kind(p_kind text) RETURNS mdame.work_kinds
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_kind mdame.work_kinds;
BEGIN
  SELECT * INTO v_kind FROM mdame.work_kinds WHERE kind = p_kind;
  IF v_kind.kind IS NULL THEN
    PERFORM mdame._invalid(format('unknown kind %s (known: %s)', mdame._clip(p_kind),
                            (SELECT string_agg(kind, ', ' ORDER BY kind) FROM mdame.work_kinds)));
  END IF;
  RETURN v_kind;
END
$$;

CREATE OR REPLACE FUNCTION mdame._lock_lost(p_lock_name text, p_holder text, p_token bigint)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_lock mdame.system_locks;
BEGIN
  SELECT * INTO v_lock FROM mdame.system_locks WHERE lock_name = p_lock_name;
  IF v_lock.lock_name IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: lock %s has never been acquired', mdame._clip(p_lock_name));
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: lock %s is not held by %s with token %s (last holder %s, token %s%s)',
                     mdame._clip(p_lock_name), mdame._clip(p_holder), p_token,
                     mdame._clip(v_lock.holder), v_lock.token,
                     CASE WHEN v_lock.released_at IS NOT NULL THEN ', released' ELSE '' END);
END
$$;

CREATE OR REPLACE FUNCTION mdame._job_lease_lost(p_job_id bigint, p_worker_id text,
                                                 p_attempt integer)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_job mdame.jobs;
BEGIN
  SELECT * INTO v_job FROM mdame.jobs WHERE id = p_job_id;
  IF v_job.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: job %s does not exist', p_job_id);
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: job %s lease lost: worker %s attempt %s does not hold it '
                     '(state %s, lease owner %s, attempt %s)', p_job_id, mdame._clip(p_worker_id),
                     p_attempt, v_job.state, mdame._clip(v_job.lease_owner), v_job.attempt);
END
$$;

CREATE OR REPLACE FUNCTION mdame._lock_budget_entry(p_attempt_key text) RETURNS mdame.budget_ledger
LANGUAGE plpgsql AS $$
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
$$;

CREATE OR REPLACE FUNCTION mdame._lock_quota_entry(p_quota_key text) RETURNS mdame.quota_ledger
LANGUAGE plpgsql AS $$
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
$$;

-- The listed dimensions are active, every other one is not (unchanged but for cut messages).
CREATE OR REPLACE FUNCTION mdame.set_dimensions_active(p_active_slugs text[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_unknown text;
  v_changed integer;
BEGIN
  IF p_active_slugs IS NULL OR array_position(p_active_slugs, NULL) IS NOT NULL THEN
    PERFORM mdame._invalid('active_slugs must be an array of slugs without NULLs');
  END IF;
  SELECT string_agg(mdame._clip(s), ', ') INTO v_unknown
  FROM (SELECT s FROM unnest(p_active_slugs) s
         WHERE NOT EXISTS (SELECT FROM dimensions d WHERE d.slug = s) LIMIT 5) u;
  IF v_unknown IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = 'mdame: unknown dimension(s): ' || v_unknown;
  END IF;
  UPDATE dimensions
     SET active = (slug = ANY (p_active_slugs)), updated_at = now()
   WHERE active IS DISTINCT FROM (slug = ANY (p_active_slugs));
  GET DIAGNOSTICS v_changed = ROW_COUNT;
  RETURN v_changed;
END
$$;

-- =============================================================================================
-- Budgets.
-- =============================================================================================
-- Atomic check-and-reserve: the ledger id, or NULL when the amount does not fit under the cap.
-- The same attempt_key reserves once: a repeat returns the same id. A key whose reservation was
-- released is reserved afresh on the same row (released -> reserved) when the amount fits, else
-- NULL: the returned id always stands for money that is held.
CREATE OR REPLACE FUNCTION mdame.reserve_budget(p_scope text, p_period text, p_amount_micros bigint,
                                                p_attempt_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

CREATE OR REPLACE FUNCTION mdame._existing_budget_entry(p_attempt_key text, p_scope text,
                                                        p_period text, p_amount_micros bigint)
RETURNS bigint
-- VOLATILE on purpose: it must see rows committed while the caller waited for the cap lock.
LANGUAGE plpgsql AS $$
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
$$;

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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

CREATE OR REPLACE FUNCTION mdame.release_budget(p_attempt_key text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- =============================================================================================
-- Accounts: the provider's quota day, and deactivation by the registry.
-- =============================================================================================
-- A real IANA zone name (what now() AT TIME ZONE accepts, minus POSIX-style offsets).
CREATE FUNCTION mdame._is_time_zone(p_name text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT p_name IS NOT NULL AND EXISTS (SELECT FROM pg_timezone_names WHERE name = p_name)
$$;

-- YouTube's quota resets at midnight Pacific time, whatever day a backfill is working on.
ALTER TABLE dimension_accounts
  ADD COLUMN quota_timezone text NOT NULL DEFAULT 'America/Los_Angeles'
  CONSTRAINT dimension_accounts_quota_timezone_check CHECK (mdame._is_time_zone(quota_timezone));

-- The account's current quota day.
CREATE FUNCTION mdame._quota_day(p_quota_timezone text) RETURNS date
LANGUAGE sql STABLE AS $$
  SELECT (now() AT TIME ZONE p_quota_timezone)::date
$$;

DROP FUNCTION mdame.upsert_dimension_account(text, text, text, integer, boolean);

-- Creates or updates a publishing account; an account belongs to exactly one dimension.
CREATE FUNCTION mdame.upsert_dimension_account(p_dimension_slug text, p_platform text,
                                               p_handle text, p_daily_quota_units integer,
                                               p_active boolean DEFAULT true,
                                               p_quota_timezone text DEFAULT 'America/Los_Angeles')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('platform', p_platform, '^[a-z][a-z0-9_]{0,39}$'),
          mdame._require_text('handle', p_handle, 200),
          mdame._require_range('daily_quota_units', p_daily_quota_units, 0, 2147483647),
          mdame._require_not_null('active', p_active),
          mdame._require_text('quota_timezone', p_quota_timezone, 64);
  IF NOT mdame._is_time_zone(p_quota_timezone) THEN
    PERFORM mdame._invalid(format('quota_timezone %s is not a known time zone (e.g. America/Los_Angeles)',
                                  mdame._clip(p_quota_timezone)));
  END IF;
  INSERT INTO dimension_accounts AS a (dimension_id, platform, handle, daily_quota_units, active,
                                       quota_timezone)
  VALUES (v_dimension, p_platform, p_handle, p_daily_quota_units, p_active, p_quota_timezone)
  ON CONFLICT (platform, handle) DO UPDATE
    SET daily_quota_units = excluded.daily_quota_units, active = excluded.active,
        quota_timezone = excluded.quota_timezone, updated_at = now()
    WHERE a.dimension_id = excluded.dimension_id
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: account %s/%s belongs to another dimension than %s',
                       p_platform, mdame._clip(p_handle), mdame._clip(p_dimension_slug));
  END IF;
  RETURN v_id;
END
$$;

-- Exactly the listed accounts of one dimension are active: the registry calls it with the
-- accounts of the dimension's YAML, so an account removed from the file stops publishing.
-- p_accounts is a JSON array of {"platform": ..., "handle": ...}. Accounts of other dimensions
-- are never touched; a listed account that is not this dimension's raises MD006 (a typo must
-- not silently deactivate the real one). Returns how many flags changed.
CREATE FUNCTION mdame.set_dimension_accounts_active(p_dimension_slug text, p_accounts jsonb)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_listed bigint[];
  v_unknown text;
  v_changed integer;
BEGIN
  PERFORM mdame._require_json('accounts', p_accounts, 'array');
  IF EXISTS (SELECT FROM jsonb_array_elements(p_accounts) e
              WHERE jsonb_typeof(e) <> 'object'
                 OR jsonb_typeof(e -> 'platform') IS DISTINCT FROM 'string'
                 OR jsonb_typeof(e -> 'handle') IS DISTINCT FROM 'string') THEN
    PERFORM mdame._invalid('accounts must be an array of {"platform": text, "handle": text}');
  END IF;
  SELECT string_agg(mdame._clip(e ->> 'platform', 40) || '/' || mdame._clip(e ->> 'handle'), ', ')
    INTO v_unknown
    FROM (SELECT e FROM jsonb_array_elements(p_accounts) e
           WHERE NOT EXISTS (SELECT FROM dimension_accounts a
                              WHERE a.dimension_id = v_dimension
                                AND a.platform = e ->> 'platform' AND a.handle = e ->> 'handle')
           LIMIT 5) u;
  IF v_unknown IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: dimension %s has no account(s) %s', p_dimension_slug, v_unknown);
  END IF;
  SELECT coalesce(array_agg(a.id), '{}') INTO v_listed
    FROM dimension_accounts a
    JOIN jsonb_array_elements(p_accounts) e
      ON a.platform = e ->> 'platform' AND a.handle = e ->> 'handle'
   WHERE a.dimension_id = v_dimension;
  UPDATE dimension_accounts
     SET active = (id = ANY (v_listed)), updated_at = now()
   WHERE dimension_id = v_dimension AND active IS DISTINCT FROM (id = ANY (v_listed));
  GET DIAGNOSTICS v_changed = ROW_COUNT;
  RETURN v_changed;
END
$$;

-- No new publication for an inactive account, whichever code path inserts it. MD003 is not
-- one of the errors upsert_work_unit maps, so it reaches the caller as it is.
CREATE FUNCTION mdame._publication_account_is_active() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_account mdame.dimension_accounts;
BEGIN
  SELECT * INTO v_account FROM mdame.dimension_accounts WHERE id = NEW.account_id;
  IF v_account.id IS NOT NULL AND NOT v_account.active THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: account %s (%s/%s) is inactive: no new publication',
                       v_account.id, v_account.platform, mdame._clip(v_account.handle));
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER publication_account_is_active
  BEFORE INSERT ON publications
  FOR EACH ROW EXECUTE FUNCTION _publication_account_is_active();

-- =============================================================================================
-- Quotas: per account and provider quota day.
-- =============================================================================================
DROP FUNCTION mdame.reserve_quota(bigint, date, integer, text);

-- Reserves units on the account's current quota day (now() in its quota_timezone; the caller's
-- partition date plays no part, so a backfill of many days spends one day's quota per real
-- day). Returns the ledger id, or NULL when the units do not fit that day. The same key reserves
-- once: while held (reserved or committed) a repeat returns the same id, even after midnight; a
-- released key is reserved afresh on the same row for today (NULL when it does not fit).
CREATE FUNCTION mdame.reserve_quota(p_account_id bigint, p_units integer, p_quota_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_account dimension_accounts;
  v_day date;
  v_used bigint;
  v_entry quota_ledger;
BEGIN
  PERFORM mdame._require_not_null('account_id', p_account_id),
          mdame._require_range('units', p_units, 1, 2147483647),
          mdame._require_text('quota_key', p_quota_key);
  -- The account row serialises reservations for it.
  SELECT * INTO v_account FROM dimension_accounts WHERE id = p_account_id FOR NO KEY UPDATE;
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  v_day := mdame._quota_day(v_account.quota_timezone);
  SELECT * INTO v_entry FROM quota_ledger WHERE quota_key = p_quota_key FOR UPDATE;
  IF v_entry.id IS NOT NULL THEN
    IF (v_entry.account_id, v_entry.units) IS DISTINCT FROM (p_account_id, p_units) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: quota_key %s was reserved for account %s, %s units',
                         mdame._clip(p_quota_key), v_entry.account_id, v_entry.units);
    ELSIF v_entry.state <> 'released' THEN
      RETURN v_entry.id;
    END IF;
  END IF;
  SELECT coalesce(sum(units) FILTER (WHERE state <> 'released'), 0) INTO v_used
    FROM quota_ledger WHERE account_id = p_account_id AND day = v_day;
  IF v_used + p_units > v_account.daily_quota_units THEN
    RETURN NULL;
  END IF;
  IF v_entry.id IS NOT NULL THEN
    UPDATE quota_ledger SET state = 'reserved', day = v_day, updated_at = now()
     WHERE id = v_entry.id;
    RETURN v_entry.id;
  END IF;
  INSERT INTO quota_ledger (account_id, day, quota_key, units)
  VALUES (p_account_id, v_day, p_quota_key, p_units)
  RETURNING id INTO v_entry.id;
  RETURN v_entry.id;
END
$$;

CREATE OR REPLACE FUNCTION mdame.commit_quota(p_quota_key text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

CREATE OR REPLACE FUNCTION mdame.release_quota(p_quota_key text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- =============================================================================================
-- Reviews: the whole required set, on exactly this file.
-- =============================================================================================
DROP FUNCTION mdame.is_approved(bigint, text);

-- Approved means: the latest review of the render is of this very file (a review of another
-- hash, a re-rendered or tampered file, voids older approvals); every check recorded on this
-- file has 'approved' as its latest verdict; and every check in p_required_checks (the
-- dimension's required set) has such a verdict. An empty or NULL set is refused: it would make
-- an unreviewed file approved.
CREATE FUNCTION mdame.is_approved(p_render_id bigint, p_content_sha256 text,
                                  p_required_checks text[])
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_check text;
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id),
          mdame._require_sha256('content_sha256', p_content_sha256);
  IF p_required_checks IS NULL OR cardinality(p_required_checks) = 0 THEN
    PERFORM mdame._invalid('required_checks must name at least one check');
  END IF;
  FOREACH v_check IN ARRAY p_required_checks LOOP
    PERFORM mdame._require_match('required check', v_check, '^[a-z][a-z0-9_.-]{0,62}$');
  END LOOP;
  IF NOT EXISTS (SELECT FROM renders WHERE id = p_render_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: render %s does not exist', p_render_id);
  END IF;
  RETURN coalesce((
    SELECT r.content_sha256 = p_content_sha256 FROM reviews r
     WHERE r.render_id = p_render_id ORDER BY r.id DESC LIMIT 1), false)
    AND coalesce((
      SELECT bool_and(latest.verdict = 'approved')
             AND array_agg(latest.check_name) @> p_required_checks
        FROM (SELECT DISTINCT ON (r.check_name) r.check_name, r.verdict FROM reviews r
               WHERE r.render_id = p_render_id AND r.content_sha256 = p_content_sha256
               ORDER BY r.check_name, r.id DESC) latest), false);
END
$$;

-- =============================================================================================
-- One publication of the same bytes per account (a natural column: upsert_work_unit fills it
-- from the payload key of the same name).
-- =============================================================================================
ALTER TABLE publications
  ADD COLUMN content_sha256 text CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
  ADD CONSTRAINT publications_same_bytes_once_per_account UNIQUE (account_id, content_sha256);

-- =============================================================================================
-- Row-level security on every table; only mdame_app has a (read) policy.
-- =============================================================================================
DO $$
DECLARE
  v_table text;
BEGIN
  FOR v_table IN
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
  LOOP
    EXECUTE format('ALTER TABLE mdame.%I ENABLE ROW LEVEL SECURITY', v_table);
    EXECUTE format('CREATE POLICY app_reads ON mdame.%I FOR SELECT TO mdame_app USING (true)',
                   v_table);
  END LOOP;
END
$$;

-- Views run as their owner, who bypasses row security: make them check the caller's instead.
ALTER VIEW budget_usage SET (security_invoker = true);
ALTER VIEW quota_usage SET (security_invoker = true);

-- Belt and braces on top of the default privileges from 0001.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mdame TO mdame_app;
