-- Dimensions and their accounts.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Creates or updates a dimension by slug (the registry sync calls it for every dimension).
CREATE OR REPLACE FUNCTION mdame.upsert_dimension(p_slug text, p_title text, p_config jsonb DEFAULT '{}'::jsonb, p_active boolean DEFAULT true)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('slug', p_slug, '^[a-z0-9][a-z0-9_-]{0,62}$'),
          mdame._require_text('title', p_title, 200), mdame._require_json('config', p_config),
          mdame._require_not_null('active', p_active);
  INSERT INTO dimensions AS d (slug, title, config, active)
  VALUES (p_slug, p_title, p_config, p_active)
  ON CONFLICT (slug) DO UPDATE
    SET title = excluded.title, config = excluded.config, active = excluded.active,
        updated_at = now()
    WHERE (d.title, d.config, d.active) IS DISTINCT FROM (excluded.title, excluded.config, excluded.active)
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN  -- unchanged
    SELECT id INTO v_id FROM dimensions WHERE slug = p_slug;
  END IF;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.upsert_dimension(p_slug text, p_title text, p_config jsonb, p_active boolean) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.upsert_dimension(p_slug text, p_title text, p_config jsonb, p_active boolean) TO mdame_admin;

-- The listed dimensions are active, every other one is not (unchanged but for cut messages).
CREATE OR REPLACE FUNCTION mdame.set_dimensions_active(p_active_slugs text[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.set_dimensions_active(p_active_slugs text[]) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.set_dimensions_active(p_active_slugs text[]) TO mdame_admin;

-- Creates or updates a publishing account; an account belongs to exactly one dimension.
-- daily_posts caps the uploads it may start a quota day (the ledger's insert bucket).
CREATE OR REPLACE FUNCTION mdame.upsert_dimension_account(p_dimension_slug text, p_platform text, p_handle text, p_daily_quota_units integer, p_active boolean DEFAULT true, p_quota_timezone text DEFAULT 'America/Los_Angeles'::text, p_daily_posts integer DEFAULT 100)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('platform', p_platform, '^[a-z][a-z0-9_]{0,39}$'),
          mdame._require_text('handle', p_handle, 200),
          mdame._require_range('daily_quota_units', p_daily_quota_units, 0, 2147483647),
          mdame._require_not_null('active', p_active),
          mdame._require_text('quota_timezone', p_quota_timezone, 64),
          mdame._require_range('daily_posts', p_daily_posts, 0, 2147483647);
  -- The outbox is the provider that stands in for every platform offline, not a platform: a
  -- client that still registers an outbox account would add a second account beside the
  -- youtube one its old account became.
  IF p_platform = 'outbox' THEN
    PERFORM mdame._invalid('platform outbox is now youtube (the outbox is the offline provider, '
                           'chosen by MDAME_PROVIDERS): register the account as youtube');
  END IF;
  IF NOT mdame._is_time_zone(p_quota_timezone) THEN
    PERFORM mdame._invalid(format('quota_timezone %s is not a known time zone (e.g. America/Los_Angeles)',
                                  mdame._clip(p_quota_timezone)));
  END IF;
  INSERT INTO dimension_accounts AS a (dimension_id, platform, handle, daily_quota_units, active,
                                       quota_timezone, daily_insert_calls)
  VALUES (v_dimension, p_platform, p_handle, p_daily_quota_units, p_active, p_quota_timezone,
          p_daily_posts)
  ON CONFLICT (platform, handle) DO UPDATE
    SET daily_quota_units = excluded.daily_quota_units, active = excluded.active,
        quota_timezone = excluded.quota_timezone,
        daily_insert_calls = excluded.daily_insert_calls, updated_at = now()
    WHERE a.dimension_id = excluded.dimension_id
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: account %s/%s belongs to another dimension than %s',
                       p_platform, mdame._clip(p_handle), mdame._clip(p_dimension_slug));
  END IF;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.upsert_dimension_account(p_dimension_slug text, p_platform text, p_handle text, p_daily_quota_units integer, p_active boolean, p_quota_timezone text, p_daily_posts integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.upsert_dimension_account(p_dimension_slug text, p_platform text, p_handle text, p_daily_quota_units integer, p_active boolean, p_quota_timezone text, p_daily_posts integer) TO mdame_admin;

-- A dimension file's registration in one transaction: the dimension, each of its accounts, and
-- which of them publish (the others are deactivated, their grants kept). p_accounts: an array of
-- {platform, handle, daily_quota_units, quota_timezone, daily_posts, active}. One commit for
-- the whole file, and a failure anywhere leaves the dimension as it was.
CREATE OR REPLACE FUNCTION mdame.register_dimension(p_slug text, p_title text, p_config jsonb, p_active boolean, p_accounts jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_account jsonb;
  v_publishing jsonb := '[]'::jsonb;
BEGIN
  PERFORM mdame._require_json('accounts', p_accounts, 'array');
  IF EXISTS (SELECT FROM jsonb_array_elements(p_accounts) e
              WHERE jsonb_typeof(e) <> 'object'
                 OR jsonb_typeof(e -> 'platform') IS DISTINCT FROM 'string'
                 OR jsonb_typeof(e -> 'handle') IS DISTINCT FROM 'string'
                 OR jsonb_typeof(e -> 'daily_quota_units') IS DISTINCT FROM 'number'
                 OR jsonb_typeof(e -> 'quota_timezone') IS DISTINCT FROM 'string'
                 OR jsonb_typeof(e -> 'daily_posts') IS DISTINCT FROM 'number'
                 OR jsonb_typeof(e -> 'active') IS DISTINCT FROM 'boolean') THEN
    PERFORM mdame._invalid('accounts must be an array of {"platform": text, "handle": text, '
                           '"daily_quota_units": int, "quota_timezone": text, '
                           '"daily_posts": int, "active": bool}');
  END IF;
  v_id := mdame.upsert_dimension(p_slug, p_title, p_config, p_active);
  FOR v_account IN SELECT e FROM jsonb_array_elements(p_accounts) e LOOP
    PERFORM mdame.upsert_dimension_account(
      p_slug, v_account ->> 'platform', v_account ->> 'handle',
      mdame._json_int('daily_quota_units', v_account -> 'daily_quota_units'),
      (v_account ->> 'active')::boolean, v_account ->> 'quota_timezone',
      mdame._json_int('daily_posts', v_account -> 'daily_posts'));
    IF (v_account ->> 'active')::boolean THEN
      v_publishing := v_publishing || jsonb_build_array(
        jsonb_build_object('platform', v_account -> 'platform', 'handle', v_account -> 'handle'));
    END IF;
  END LOOP;
  PERFORM mdame.set_dimension_accounts_active(p_slug, v_publishing);
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.register_dimension(p_slug text, p_title text, p_config jsonb, p_active boolean, p_accounts jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.register_dimension(p_slug text, p_title text, p_config jsonb, p_active boolean, p_accounts jsonb) TO mdame_admin;

-- A JSON number that must be a whole integer (an account's counts).
CREATE OR REPLACE FUNCTION mdame._json_int(p_name text, p_value jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_number numeric := (p_value #>> '{}')::numeric;
BEGIN
  IF v_number IS NULL OR v_number <> trunc(v_number) OR v_number NOT BETWEEN 0 AND 2147483647 THEN
    PERFORM mdame._invalid(format('%s must be a whole number from 0 to 2147483647, got %s',
                                  p_name, mdame._clip(coalesce(p_value::text, 'NULL'))));
  END IF;
  RETURN v_number::integer;
END
$function$;
REVOKE ALL ON FUNCTION mdame._json_int(p_name text, p_value jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- A real IANA zone name (what now() AT TIME ZONE accepts, minus POSIX-style offsets): one of
-- the names read at migrate (mdame.time_zones), or, for a name the server learnt since (a newer
-- tzdata) or a wrong one, the server's list itself, which is slow but only met then.
CREATE OR REPLACE FUNCTION mdame._is_time_zone(p_name text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  IF p_name IS NULL THEN
    RETURN false;
  END IF;
  RETURN EXISTS (SELECT FROM mdame.time_zones WHERE name = p_name)
      OR EXISTS (SELECT FROM pg_timezone_names WHERE name = p_name);
END
$function$;
REVOKE ALL ON FUNCTION mdame._is_time_zone(p_name text) FROM PUBLIC, mdame_app, mdame_admin;
-- The account's quota day is in a real time zone; the check calls the function above, so it is
-- added here, once, rather than in the schema baseline that runs before any function exists.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_constraint
                  WHERE conname = 'dimension_accounts_quota_timezone_check'
                    AND conrelid = 'mdame.dimension_accounts'::regclass) THEN
    ALTER TABLE mdame.dimension_accounts ADD CONSTRAINT dimension_accounts_quota_timezone_check
      CHECK (mdame._is_time_zone(quota_timezone));
  END IF;
END
$$;

-- Exactly the listed accounts of one dimension are active: the registry calls it with the
-- accounts of the dimension's YAML, so an account removed from the file stops publishing.
-- p_accounts is a JSON array of {"platform": ..., "handle": ...}. Accounts of other dimensions
-- are never touched; a listed account that is not this dimension's raises MD006 (a typo must
-- not silently deactivate the real one). Returns how many flags changed.
CREATE OR REPLACE FUNCTION mdame.set_dimension_accounts_active(p_dimension_slug text, p_accounts jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.set_dimension_accounts_active(p_dimension_slug text, p_accounts jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.set_dimension_accounts_active(p_dimension_slug text, p_accounts jsonb) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame._account_dimension(p_account_id bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._account_dimension(p_account_id bigint) FROM PUBLIC, mdame_app, mdame_admin;
