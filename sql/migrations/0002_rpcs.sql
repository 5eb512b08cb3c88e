-- 0002: the RPCs, the only way state changes.
--
-- Every RPC is SECURITY DEFINER (it runs as the owner, who may write) with a pinned
-- search_path (so a caller cannot shadow our tables or operators), EXECUTE revoked from PUBLIC
-- and granted to mdame_app. One concept per function; each validates its input first and raises
-- before touching anything, and runs in the caller's single transaction, so a failed call changes
-- nothing.
--
-- Errors raised on purpose carry a message starting 'mdame: ' and a SQLSTATE of class MD:
--   MD001 invalid input (NULL/empty key, unknown kind, negative amount, oversized JSON, ...)
--   MD002 idempotency conflict (a key reused with different content)
--   MD003 state conflict (the row is not in the state the caller expected; illegal transition)
--   MD004 lease or fencing token lost (a stale lock token, a job lease taken over)
--   MD005 reconcile required (the last provider attempt's outcome is not known)
--   MD006 not found (the row the call refers to does not exist)
-- JSON arguments (payload, detail, config, result, reasons) are limited to 256 KiB of text.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- =============================================================================================
-- Input checks shared by the RPCs. SECURITY INVOKER and side-effect free: they only raise.
-- =============================================================================================
CREATE FUNCTION mdame._invalid(p_message text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD001', MESSAGE = 'mdame: ' || p_message;
END
$$;

CREATE FUNCTION mdame._require_text(p_name text, p_value text, p_max integer DEFAULT 512)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value = '' THEN
    PERFORM mdame._invalid(format('%s must not be NULL or empty', p_name));
  ELSIF length(p_value) > p_max THEN
    PERFORM mdame._invalid(format('%s is longer than %s characters', p_name, p_max));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._require_match(p_name text, p_value text, p_pattern text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value !~ p_pattern THEN
    PERFORM mdame._invalid(format('%s %s does not match %s', p_name,
                            coalesce(quote_literal(p_value), 'NULL'), p_pattern));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._require_one_of(p_name text, p_value text, p_allowed text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR NOT (p_value = ANY (p_allowed)) THEN
    PERFORM mdame._invalid(format('%s must be one of %s (got %s)', p_name,
                            array_to_string(p_allowed, ', '),
                            coalesce(quote_literal(p_value), 'NULL')));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._require_sha256(p_name text, p_value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL OR p_value !~ '^[0-9a-f]{64}$' THEN
    PERFORM mdame._invalid(format('%s must be a lowercase hex SHA-256 (got %s)', p_name,
                            coalesce(quote_literal(left(p_value, 80)), 'NULL')));
  END IF;
  RETURN p_value;
END
$$;

-- Payloads are immutable inputs that travel with every read: keep them bounded.
CREATE FUNCTION mdame._require_json(p_name text, p_value jsonb, p_type text DEFAULT 'object')
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_bytes integer;
BEGIN
  IF p_value IS NULL THEN
    PERFORM mdame._invalid(format('%s must not be NULL', p_name));
  ELSIF jsonb_typeof(p_value) <> p_type THEN
    PERFORM mdame._invalid(format('%s must be a JSON %s (got %s)', p_name, p_type, jsonb_typeof(p_value)));
  END IF;
  v_bytes := octet_length(p_value::text);
  IF v_bytes > 262144 THEN
    PERFORM mdame._invalid(format('%s is %s bytes, over the 256 KiB limit', p_name, v_bytes));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._require_range(p_name text, p_value bigint, p_min bigint, p_max bigint)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL THEN
    PERFORM mdame._invalid(format('%s must not be NULL', p_name));
  ELSIF p_value < p_min OR p_value > p_max THEN
    PERFORM mdame._invalid(format('%s must be between %s and %s (got %s)', p_name, p_min, p_max, p_value));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._require_not_null(p_name text, p_value anyelement) RETURNS anyelement
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_value IS NULL THEN
    PERFORM mdame._invalid(format('%s must not be NULL', p_name));
  END IF;
  RETURN p_value;
END
$$;

CREATE FUNCTION mdame._dimension_id(p_slug text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_id bigint;
BEGIN
  SELECT id INTO v_id FROM mdame.dimensions WHERE slug = mdame._require_text('dimension_slug', p_slug, 63);
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: unknown dimension %L', p_slug);
  END IF;
  RETURN v_id;
END
$$;

CREATE FUNCTION mdame._work_kind(p_kind text) RETURNS mdame.work_kinds
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_kind mdame.work_kinds;
BEGIN
  SELECT * INTO v_kind FROM mdame.work_kinds WHERE kind = p_kind;
  IF v_kind.kind IS NULL THEN
    PERFORM mdame._invalid(format('unknown kind %s (known: %s)', coalesce(quote_literal(p_kind), 'NULL'),
                            (SELECT string_agg(kind, ', ' ORDER BY kind) FROM mdame.work_kinds)));
  END IF;
  RETURN v_kind;
END
$$;

CREATE FUNCTION mdame._seconds(p_name text, p_value integer) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
  -- Leases, TTLs and delays: at least a second, at most a year.
  SELECT mdame._require_range(p_name, p_value, 1, 31622400) * interval '1 second'
$$;

-- =============================================================================================
-- Pipeline lock: a lease with a fencing token.
-- =============================================================================================
-- Returns a new token, strictly greater than any token handed out before, or NULL while a live
-- holder has the lock. A released or expired lock is taken over.
CREATE FUNCTION mdame.acquire_pipeline_lock(p_lock_name text, p_holder text, p_ttl_seconds integer)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_ttl interval := mdame._seconds('ttl_seconds', p_ttl_seconds);
  v_token bigint;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200);
  INSERT INTO system_locks AS l
    (lock_name, holder, token, ttl_seconds, acquired_at, heartbeat_at, expires_at)
  VALUES (p_lock_name, p_holder, nextval('lock_tokens'), p_ttl_seconds, now(), now(), now() + v_ttl)
  ON CONFLICT (lock_name) DO UPDATE
    SET holder = excluded.holder, token = excluded.token, ttl_seconds = excluded.ttl_seconds,
        acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at,
        expires_at = excluded.expires_at, released_at = NULL
    WHERE l.released_at IS NOT NULL OR l.expires_at <= now()
  RETURNING token INTO v_token;
  IF v_token IS NOT NULL THEN
    INSERT INTO events (subject_kind, subject_id, event, detail)
    VALUES ('lock', v_token, 'acquired', jsonb_build_object('lock_name', p_lock_name, 'holder', p_holder));
  END IF;
  RETURN v_token;
END
$$;

-- Raises MD004 explaining why (holder, token) no longer holds the lock.
CREATE FUNCTION mdame._lock_lost(p_lock_name text, p_holder text, p_token bigint) RETURNS void
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_lock mdame.system_locks;
BEGIN
  SELECT * INTO v_lock FROM mdame.system_locks WHERE lock_name = p_lock_name;
  IF v_lock.lock_name IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: lock %L has never been acquired', p_lock_name);
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: lock %L is not held by %L with token %s (last holder %L, token %s%s)',
                     p_lock_name, p_holder, p_token, v_lock.holder, v_lock.token,
                     CASE WHEN v_lock.released_at IS NOT NULL THEN ', released' ELSE '' END);
END
$$;

-- Extends the lease. Accepted while the token is still the current one (even just after expiry,
-- as long as nobody took over); an old token is rejected with MD004.
CREATE FUNCTION mdame.heartbeat_pipeline_lock(p_lock_name text, p_holder text, p_token bigint,
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
  RETURN v_expires;
END
$$;

-- Frees the lock. true: released now; false: this token had already released it (a retry);
-- an old token raises MD004.
CREATE FUNCTION mdame.release_pipeline_lock(p_lock_name text, p_holder text, p_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_lock system_locks;
BEGIN
  PERFORM mdame._require_text('lock_name', p_lock_name, 200), mdame._require_text('holder', p_holder, 200),
          mdame._require_not_null('token', p_token);
  SELECT * INTO v_lock FROM system_locks
   WHERE lock_name = p_lock_name AND holder = p_holder AND token = p_token
   FOR UPDATE;
  IF v_lock.lock_name IS NULL THEN
    PERFORM mdame._lock_lost(p_lock_name, p_holder, p_token);
  ELSIF v_lock.released_at IS NOT NULL THEN
    RETURN false;
  END IF;
  UPDATE system_locks SET released_at = now() WHERE lock_name = p_lock_name;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('lock', p_token, 'released', jsonb_build_object('lock_name', p_lock_name, 'holder', p_holder));
  RETURN true;
END
$$;

-- =============================================================================================
-- Dimensions, accounts, pipeline runs.
-- =============================================================================================
-- Creates or updates a dimension by slug (the registry sync calls it for every dimension).
CREATE FUNCTION mdame.upsert_dimension(p_slug text, p_title text, p_config jsonb DEFAULT '{}',
                                 p_active boolean DEFAULT true)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- The listed dimensions are active, every other one is not. Returns how many flags changed.
-- An unknown slug raises: a typo must not deactivate a live niche.
CREATE FUNCTION mdame.set_dimensions_active(p_active_slugs text[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_unknown text;
  v_changed integer;
BEGIN
  IF p_active_slugs IS NULL OR array_position(p_active_slugs, NULL) IS NOT NULL THEN
    PERFORM mdame._invalid('active_slugs must be an array of slugs without NULLs');
  END IF;
  SELECT string_agg(s, ', ') INTO v_unknown
  FROM unnest(p_active_slugs) s
  WHERE NOT EXISTS (SELECT FROM dimensions d WHERE d.slug = s);
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

-- Creates or updates a publishing account; an account belongs to exactly one dimension.
CREATE FUNCTION mdame.upsert_dimension_account(p_dimension_slug text, p_platform text, p_handle text,
                                         p_daily_quota_units integer,
                                         p_active boolean DEFAULT true)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint := mdame._dimension_id(p_dimension_slug);
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('platform', p_platform, '^[a-z][a-z0-9_]{0,39}$'),
          mdame._require_text('handle', p_handle, 200),
          mdame._require_range('daily_quota_units', p_daily_quota_units, 0, 2147483647),
          mdame._require_not_null('active', p_active);
  INSERT INTO dimension_accounts AS a (dimension_id, platform, handle, daily_quota_units, active)
  VALUES (v_dimension, p_platform, p_handle, p_daily_quota_units, p_active)
  ON CONFLICT (platform, handle) DO UPDATE
    SET daily_quota_units = excluded.daily_quota_units, active = excluded.active,
        updated_at = now()
    WHERE a.dimension_id = excluded.dimension_id
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: account %s/%s belongs to another dimension than %L',
                       p_platform, p_handle, p_dimension_slug);
  END IF;
  RETURN v_id;
END
$$;

-- Records the start of a run. Idempotent per execution_id. A lock token, when given, must be a
-- live one: a run must not start under a lock it no longer holds.
CREATE FUNCTION mdame.start_pipeline_run(p_execution_id uuid, p_dimension_slug text,
                                   p_partition_key text, p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint;
  v_run pipeline_runs;
BEGIN
  PERFORM mdame._require_not_null('execution_id', p_execution_id),
          mdame._require_text('partition_key', p_partition_key, 200);
  IF p_dimension_slug IS NOT NULL THEN
    v_dimension := mdame._dimension_id(p_dimension_slug);
  END IF;
  IF p_lock_token IS NOT NULL AND NOT EXISTS (
       SELECT FROM system_locks
        WHERE token = p_lock_token AND released_at IS NULL AND expires_at > now()) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD004',
      MESSAGE = format('mdame: lock token %s is not a live lock token', p_lock_token);
  END IF;
  INSERT INTO pipeline_runs (execution_id, dimension_id, partition_key, lock_token)
  VALUES (p_execution_id, v_dimension, p_partition_key, p_lock_token)
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
                             'lock_token', p_lock_token));
  RETURN v_run.id;
END
$$;

-- Finishes a running run. true: finished now; false: already finished with this status.
CREATE FUNCTION mdame.finish_pipeline_run(p_execution_id uuid, p_status text, p_detail jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
  ELSIF v_run.status <> 'running' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: pipeline run %s already finished as %s', p_execution_id, v_run.status);
  END IF;
  UPDATE pipeline_runs
     SET status = p_status, detail = detail || p_detail, finished_at = now()
   WHERE id = v_run.id;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('pipeline_run', v_run.id, 'finished', 'running', p_status, p_detail);
  RETURN true;
END
$$;

-- =============================================================================================
-- Work units: idempotent creation and checked transitions.
-- =============================================================================================
-- Creates the work unit for an idempotency key, or returns the existing one. The natural
-- foreign-key columns of the kind's table (dimension_id, script_id, ...) are filled from the
-- payload keys of the same name. The same key with a different payload raises MD002.
CREATE FUNCTION mdame.upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_kind work_kinds := mdame._work_kind(p_kind);
  v_columns text;
  v_id bigint;
  v_existing jsonb;
  v_column text;
BEGIN
  PERFORM mdame._require_text('idempotency_key', p_idempotency_key),
          mdame._require_json('payload', p_payload);

  EXECUTE format('SELECT id, payload FROM %I WHERE idempotency_key = $1', v_kind.table_name)
     INTO v_id, v_existing USING p_idempotency_key;

  IF v_id IS NULL THEN
    -- Everything that is not a shared work-unit column is a natural column filled from payload.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO v_columns
      FROM pg_attribute
     WHERE attrelid = format('mdame.%I', v_kind.table_name)::regclass
       AND attnum > 0 AND NOT attisdropped
       AND attname NOT IN ('id', 'kind', 'idempotency_key', 'state', 'payload', 'result',
                           'attempts', 'created_at', 'updated_at');
    BEGIN
      EXECUTE format(
        'INSERT INTO %1$I (idempotency_key, state, payload, %2$s)
         SELECT $1, $2, $3, %2$s FROM jsonb_populate_record(NULL::%1$I, $3)
         ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING id', v_kind.table_name, v_columns)
        INTO v_id USING p_idempotency_key, v_kind.initial_state, p_payload;
    EXCEPTION
      WHEN not_null_violation THEN
        GET STACKED DIAGNOSTICS v_column = COLUMN_NAME;
        PERFORM mdame._invalid(format('payload for kind %s lacks required key %s', p_kind, v_column));
      WHEN foreign_key_violation THEN
        GET STACKED DIAGNOSTICS v_column = MESSAGE_TEXT;
        RAISE EXCEPTION USING ERRCODE = 'MD006',
          MESSAGE = format('mdame: payload for kind %s refers to a missing row (%s)', p_kind, v_column);
      WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS v_column = MESSAGE_TEXT;
        RAISE EXCEPTION USING ERRCODE = 'MD002',
          MESSAGE = format('mdame: another %s already exists for these natural keys (%s)', p_kind, v_column);
      WHEN data_exception OR check_violation THEN
        GET STACKED DIAGNOSTICS v_column = MESSAGE_TEXT;
        PERFORM mdame._invalid(format('payload for kind %s is invalid: %s', p_kind, v_column));
    END;
    IF v_id IS NOT NULL THEN
      INSERT INTO events (subject_kind, subject_id, event, to_state)
      VALUES (p_kind, v_id, 'created', v_kind.initial_state);
      RETURN v_id;
    END IF;
    -- Lost a race with a concurrent creator of the same key: compare with its row.
    EXECUTE format('SELECT id, payload FROM %I WHERE idempotency_key = $1', v_kind.table_name)
       INTO v_id, v_existing USING p_idempotency_key;
  END IF;

  IF v_existing IS DISTINCT FROM p_payload THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: %s %L already exists (id %s) with a different payload',
                       p_kind, p_idempotency_key, v_id);
  END IF;
  RETURN v_id;
END
$$;

-- Locks the row and returns its state; raises MD006 when it does not exist.
CREATE FUNCTION mdame._lock_work_unit(p_kind mdame.work_kinds, p_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_not_null('id', p_id);
  EXECUTE format('SELECT state FROM mdame.%I WHERE id = $1 FOR UPDATE', p_kind.table_name)
     INTO v_state USING p_id;
  IF v_state IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: %s %s does not exist', p_kind.kind, p_id);
  END IF;
  RETURN v_state;
END
$$;

-- Moves a work unit from_state -> to_state if the allowed-transitions table permits it, merges
-- detail into result (top-level keys) and appends an event. Returns the event id.
-- The caller states the state it believes the row is in: a mismatch raises MD003 naming both,
-- so two racing writers cannot both win. from_state = to_state is never a transition.
CREATE FUNCTION mdame.transition(p_kind text, p_id bigint, p_from_state text, p_to_state text,
                           p_detail jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_kind work_kinds := mdame._work_kind(p_kind);
  v_current text;
  v_event bigint;
BEGIN
  PERFORM mdame._require_text('from_state', p_from_state, 64), mdame._require_text('to_state', p_to_state, 64),
          mdame._require_json('detail', p_detail);
  IF p_from_state = p_to_state THEN
    PERFORM mdame._invalid(format('%s %s: %s -> %s is not a transition (re-read the row instead)',
                            p_kind, p_id, p_from_state, p_to_state));
  END IF;
  v_current := mdame._lock_work_unit(v_kind, p_id);
  IF v_current <> p_from_state THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: %s %s is in state %s, not %s (wanted %s -> %s)',
                       p_kind, p_id, v_current, p_from_state, p_from_state, p_to_state);
  END IF;
  IF NOT EXISTS (SELECT FROM allowed_transitions
                  WHERE kind = p_kind AND from_state = p_from_state AND to_state = p_to_state) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: illegal transition for %s: %s -> %s', p_kind, p_from_state, p_to_state);
  END IF;
  EXECUTE format('UPDATE %I SET state = $2, result = result || $3, updated_at = now() WHERE id = $1',
                 v_kind.table_name)
    USING p_id, p_to_state, p_detail;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES (p_kind, p_id, 'transition', p_from_state, p_to_state, p_detail)
  RETURNING id INTO v_event;
  RETURN v_event;
END
$$;

-- Counts one more attempt at a work unit that stays in its (non-terminal) state, e.g. a hook
-- audit retry; merges detail into result and appends an event. Returns the new count.
CREATE FUNCTION mdame.bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb DEFAULT '{}')
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_kind work_kinds := mdame._work_kind(p_kind);
  v_state text;
  v_attempts integer;
BEGIN
  PERFORM mdame._require_json('detail', p_detail);
  v_state := mdame._lock_work_unit(v_kind, p_id);
  IF (SELECT is_terminal FROM work_states WHERE kind = p_kind AND state = v_state) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: %s %s is in terminal state %s', p_kind, p_id, v_state);
  END IF;
  EXECUTE format('UPDATE %I SET attempts = attempts + 1, result = result || $2, updated_at = now()
                  WHERE id = $1 RETURNING attempts', v_kind.table_name)
     INTO v_attempts USING p_id, p_detail;
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES (p_kind, p_id, 'attempt', v_state, v_state, p_detail || jsonb_build_object('attempts', v_attempts));
  RETURN v_attempts;
END
$$;

-- =============================================================================================
-- Job queue.
-- =============================================================================================
-- Enqueues a job once per idempotency key; the same key and content returns the existing id
-- (whatever state it is in now), the same key with other content raises MD002.
CREATE FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text, p_payload jsonb,
                            p_max_attempts integer DEFAULT 3, p_priority integer DEFAULT 100,
                            p_delay_seconds integer DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_job jobs;
BEGIN
  PERFORM mdame._require_match('job_type', p_job_type, '^[a-z][a-z0-9_.-]{0,62}$'),
          mdame._require_text('idempotency_key', p_idempotency_key),
          mdame._require_json('payload', p_payload),
          mdame._require_range('max_attempts', p_max_attempts, 1, 100),
          mdame._require_range('priority', p_priority, -1000000, 1000000),
          mdame._require_range('delay_seconds', p_delay_seconds, 0, 31622400);
  INSERT INTO jobs (job_type, idempotency_key, payload, max_attempts, priority, run_after)
  VALUES (p_job_type, p_idempotency_key, p_payload, p_max_attempts, p_priority,
          now() + p_delay_seconds * interval '1 second')
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING * INTO v_job;
  IF v_job.id IS NOT NULL THEN
    RETURN v_job.id;
  END IF;
  SELECT * INTO v_job FROM jobs WHERE idempotency_key = p_idempotency_key;
  IF (v_job.job_type, v_job.payload) IS DISTINCT FROM (p_job_type, p_payload) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: job %L already exists (id %s) with a different type or payload',
                       p_idempotency_key, v_job.id);
  END IF;
  RETURN v_job.id;
END
$$;

-- Claims the next runnable job of a type under a lease: attempt + 1, lease owner and expiry set.
-- Returns one row, or none when nothing is runnable. SKIP LOCKED lets concurrent workers pass
-- each other instead of queueing on the same row; jobs_queued_idx keeps the scan off finished
-- jobs.
CREATE FUNCTION mdame.claim_job(p_job_type text, p_worker_id text, p_lease_seconds integer)
RETURNS TABLE (job_id bigint, job_type text, idempotency_key text, payload jsonb,
               attempt integer, max_attempts integer, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_lease interval := mdame._seconds('lease_seconds', p_lease_seconds);
BEGIN
  PERFORM mdame._require_text('job_type', p_job_type, 63), mdame._require_text('worker_id', p_worker_id, 200);
  RETURN QUERY
  WITH next AS (
    SELECT q.id FROM jobs q
     WHERE q.state = 'queued' AND q.job_type = p_job_type AND q.run_after <= now()
     ORDER BY q.priority, q.id
     LIMIT 1
     FOR UPDATE SKIP LOCKED
  )
  UPDATE jobs j
     SET state = 'running', attempt = j.attempt + 1, lease_owner = p_worker_id,
         lease_expires_at = now() + v_lease, updated_at = now()
    FROM next
   WHERE j.id = next.id
  RETURNING j.id, j.job_type, j.idempotency_key, j.payload, j.attempt, j.max_attempts,
            j.lease_expires_at;
END
$$;

-- Raises explaining why (worker, attempt) no longer holds the job's lease.
CREATE FUNCTION mdame._job_lease_lost(p_job_id bigint, p_worker_id text, p_attempt integer)
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
    MESSAGE = format('mdame: job %s lease lost: worker %L attempt %s does not hold it '
                     '(state %s, lease owner %L, attempt %s)', p_job_id, p_worker_id, p_attempt,
                     v_job.state, v_job.lease_owner, v_job.attempt);
END
$$;

CREATE FUNCTION mdame._require_lease_args(p_job_id bigint, p_worker_id text, p_attempt integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM mdame._require_not_null('job_id', p_job_id), mdame._require_text('worker_id', p_worker_id, 200),
          mdame._require_range('attempt', p_attempt, 1, 100);
END
$$;

-- Extends the lease of a running job held by (worker, attempt); returns the new expiry.
-- Accepted after expiry as long as the reaper has not requeued the job.
CREATE FUNCTION mdame.heartbeat_job(p_job_id bigint, p_worker_id text, p_attempt integer,
                              p_lease_seconds integer DEFAULT 60)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_lease interval := mdame._seconds('lease_seconds', p_lease_seconds);
  v_expires timestamptz;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt);
  UPDATE jobs SET lease_expires_at = now() + v_lease, updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
  RETURNING lease_expires_at INTO v_expires;
  IF v_expires IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  RETURN v_expires;
END
$$;

-- Marks the job succeeded. true: done now; false: this worker and attempt had already completed
-- it (a retry after a lost reply). A lost lease raises MD004.
CREATE FUNCTION mdame.complete_job(p_job_id bigint, p_worker_id text, p_attempt integer,
                             p_result jsonb DEFAULT '{}')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt), mdame._require_json('result', p_result);
  UPDATE jobs
     SET state = 'succeeded', result = p_result, lease_expires_at = NULL, finished_at = now(),
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt;
  IF FOUND THEN
    RETURN true;
  END IF;
  IF EXISTS (SELECT FROM jobs WHERE id = p_job_id AND state = 'succeeded'
                AND lease_owner = p_worker_id AND attempt = p_attempt) THEN
    RETURN false;
  END IF;
  PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  RETURN false;  -- not reached
END
$$;

-- Records a failed attempt. Retryable with attempts left: back to queued after the delay;
-- retryable without attempts left: dead; not retryable: failed. Returns the new state.
CREATE FUNCTION mdame.fail_job(p_job_id bigint, p_worker_id text, p_attempt integer, p_error text,
                         p_retryable boolean, p_retry_delay_seconds integer DEFAULT 0)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_text('error', p_error, 100000), mdame._require_not_null('retryable', p_retryable),
          mdame._require_range('retry_delay_seconds', p_retry_delay_seconds, 0, 31622400);
  UPDATE jobs
     SET state = CASE WHEN NOT p_retryable THEN 'failed'
                      WHEN attempt >= max_attempts THEN 'dead'
                      ELSE 'queued' END,
         lease_owner = CASE WHEN p_retryable AND attempt < max_attempts THEN NULL ELSE lease_owner END,
         lease_expires_at = NULL,
         run_after = now() + p_retry_delay_seconds * interval '1 second',
         last_error = left(p_error, 10000),
         finished_at = CASE WHEN p_retryable AND attempt < max_attempts THEN NULL ELSE now() END,
         updated_at = now()
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id AND attempt = p_attempt
  RETURNING state INTO v_state;
  IF v_state IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF v_state <> 'queued' THEN
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    VALUES ('job', p_job_id, 'failed', 'running', v_state,
            jsonb_build_object('worker_id', p_worker_id, 'attempt', p_attempt,
                               'error', left(p_error, 2000)));
  END IF;
  RETURN v_state;
END
$$;

-- Returns expired leases to the queue, or to dead once max_attempts is used up (of one job type,
-- or of all when NULL). Returns how many jobs it moved. Rows a worker is finishing right now are
-- skipped, not waited for.
CREATE FUNCTION mdame.reap_expired_jobs(p_job_type text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_count integer;
BEGIN
  IF p_job_type IS NOT NULL THEN
    PERFORM mdame._require_text('job_type', p_job_type, 63);
  END IF;
  WITH expired AS (
    SELECT id, lease_owner, attempt FROM jobs
     WHERE state = 'running' AND lease_expires_at < now()
       AND (p_job_type IS NULL OR job_type = p_job_type)
     FOR UPDATE SKIP LOCKED
  ), moved AS (
    UPDATE jobs j
       SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'dead' ELSE 'queued' END,
           lease_owner = CASE WHEN j.attempt >= j.max_attempts THEN j.lease_owner END,
           lease_expires_at = NULL,
           last_error = format('lease expired (worker %s, attempt %s)', e.lease_owner, e.attempt),
           finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
           updated_at = now()
      FROM expired e
     WHERE j.id = e.id
    RETURNING j.id, j.state, e.lease_owner, e.attempt
  ), logged AS (
    INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
    SELECT 'job', id, 'lease_expired', 'running', state,
           jsonb_build_object('worker_id', lease_owner, 'attempt', attempt)
      FROM moved
    RETURNING 1
  )
  SELECT count(*) INTO v_count FROM logged;
  RETURN v_count;
END
$$;

-- =============================================================================================
-- Scene cache.
-- =============================================================================================
-- Returns the cached clip for a scene hash, or no row when missing or expired.
CREATE FUNCTION mdame.lookup_scene_cache(p_scene_hash text)
RETURNS TABLE (uri text, content_sha256 text, expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128);
  RETURN QUERY
  SELECT c.uri, c.content_sha256, c.expires_at FROM scene_cache c
   WHERE c.scene_hash = p_scene_hash AND c.expires_at > now();
END
$$;

-- Stores a clip for a scene hash, idempotently: the same clip again refreshes the TTL; a live
-- entry with another clip wins (first writer wins, two GPU workers racing on one scene converge);
-- an expired entry is replaced. Returns the entry in effect.
CREATE FUNCTION mdame.put_scene_cache(p_scene_hash text, p_uri text, p_content_sha256 text,
                                p_ttl_seconds integer)
RETURNS TABLE (uri text, content_sha256 text, expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_ttl interval := mdame._seconds('ttl_seconds', p_ttl_seconds);
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128), mdame._require_text('uri', p_uri, 2000),
          mdame._require_sha256('content_sha256', p_content_sha256);
  INSERT INTO scene_cache AS c (scene_hash, uri, content_sha256, expires_at)
  VALUES (p_scene_hash, p_uri, p_content_sha256, now() + v_ttl)
  ON CONFLICT (scene_hash) DO UPDATE
    SET uri = excluded.uri, content_sha256 = excluded.content_sha256,
        created_at = CASE WHEN c.expires_at <= now() THEN now() ELSE c.created_at END,
        expires_at = CASE WHEN c.expires_at <= now() THEN excluded.expires_at
                          ELSE greatest(c.expires_at, excluded.expires_at) END
    WHERE c.expires_at <= now()
       OR (c.uri = excluded.uri AND c.content_sha256 = excluded.content_sha256);
  RETURN QUERY
  SELECT c.uri, c.content_sha256, c.expires_at FROM scene_cache c WHERE c.scene_hash = p_scene_hash;
END
$$;

-- =============================================================================================
-- Budgets (integer micro-units).
-- =============================================================================================
-- Sets (or changes) the cap of a scope and period. Lowering it below current use is allowed:
-- later reservations then fail. Returns the cap.
CREATE FUNCTION mdame.set_budget_cap(p_scope text, p_period text, p_cap_micros bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- Atomic check-and-reserve. Returns the ledger id, or NULL when the amount does not fit under
-- the cap (an expected outcome, not an error). Bad input, a missing cap or a key reused with
-- other values raise. The same attempt_key reserves once: a repeat returns the same id.
CREATE FUNCTION mdame.reserve_budget(p_scope text, p_period text, p_amount_micros bigint,
                               p_attempt_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_cap bigint;
  v_used bigint;
  v_id bigint;
BEGIN
  PERFORM mdame._require_text('scope', p_scope, 200), mdame._require_text('period', p_period, 64),
          mdame._require_range('amount_micros', p_amount_micros, 0, 9223372036854775807),
          mdame._require_text('attempt_key', p_attempt_key);
  -- The cap row is the serialisation point: concurrent reservations of one scope and period
  -- queue here, so the sum below cannot be overtaken. NO KEY UPDATE: ledger inserts that only
  -- need the FK (KEY SHARE) are not blocked by it.
  SELECT cap_micros INTO v_cap FROM budget_caps
   WHERE scope = p_scope AND period = p_period FOR NO KEY UPDATE;
  IF v_cap IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no budget cap set for scope %L period %L', p_scope, p_period);
  END IF;
  -- Checked after taking the lock: a concurrent reservation of the same key has committed by now.
  v_id := mdame._existing_budget_entry(p_attempt_key, p_scope, p_period, p_amount_micros);
  IF v_id IS NOT NULL THEN
    RETURN v_id;
  END IF;
  SELECT coalesce(sum(CASE state WHEN 'reserved' THEN reserved_micros
                                 WHEN 'settled' THEN actual_micros ELSE 0 END), 0)
    INTO v_used
    FROM budget_ledger WHERE scope = p_scope AND period = p_period;
  IF v_used + p_amount_micros > v_cap THEN
    RETURN NULL;
  END IF;
  INSERT INTO budget_ledger (scope, period, attempt_key, reserved_micros)
  VALUES (p_scope, p_period, p_attempt_key, p_amount_micros)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;

CREATE FUNCTION mdame._existing_budget_entry(p_attempt_key text, p_scope text, p_period text,
                                       p_amount_micros bigint)
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
      MESSAGE = format('mdame: budget attempt_key %L was reserved for %s/%s %s micros', p_attempt_key,
                       v_entry.scope, v_entry.period, v_entry.reserved_micros);
  END IF;
  RETURN v_entry.id;
END
$$;

CREATE FUNCTION mdame._lock_budget_entry(p_attempt_key text) RETURNS mdame.budget_ledger
LANGUAGE plpgsql AS $$
DECLARE
  v_entry mdame.budget_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.budget_ledger
   WHERE attempt_key = mdame._require_text('attempt_key', p_attempt_key) FOR UPDATE;
  IF v_entry.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no budget reservation for attempt_key %L', p_attempt_key);
  END IF;
  RETURN v_entry;
END
$$;

-- Settles a reservation at the actual cost (which may differ from the reserved amount; the
-- ledger records the truth). Repeating it with the same amount is a no-op. Returns the ledger id.
CREATE FUNCTION mdame.settle_budget(p_attempt_key text, p_actual_micros bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_entry budget_ledger;
BEGIN
  PERFORM mdame._require_range('actual_micros', p_actual_micros, 0, 9223372036854775807);
  v_entry := mdame._lock_budget_entry(p_attempt_key);
  IF v_entry.state = 'settled' AND v_entry.actual_micros = p_actual_micros THEN
    RETURN v_entry.id;
  ELSIF v_entry.state <> 'reserved' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: budget attempt_key %L is already %s%s', p_attempt_key, v_entry.state,
                       CASE WHEN v_entry.state = 'settled'
                            THEN format(' at %s micros', v_entry.actual_micros) ELSE '' END);
  END IF;
  UPDATE budget_ledger SET state = 'settled', actual_micros = p_actual_micros, updated_at = now()
   WHERE id = v_entry.id;
  RETURN v_entry.id;
END
$$;

-- Gives a reservation back. true: released now; false: already released. A settled entry
-- cannot be released (the money was spent): MD003.
CREATE FUNCTION mdame.release_budget(p_attempt_key text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_entry budget_ledger := mdame._lock_budget_entry(p_attempt_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RETURN false;
  ELSIF v_entry.state = 'settled' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: budget attempt_key %L is settled and cannot be released', p_attempt_key);
  END IF;
  UPDATE budget_ledger SET state = 'released', updated_at = now() WHERE id = v_entry.id;
  RETURN true;
END
$$;

-- =============================================================================================
-- Quotas: per account and day, capped by the account's daily_quota_units.
-- =============================================================================================
-- Same contract as reserve_budget: the ledger id, or NULL when the units do not fit today.
CREATE FUNCTION mdame.reserve_quota(p_account_id bigint, p_day date, p_units integer, p_quota_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_cap integer;
  v_used bigint;
  v_entry quota_ledger;
BEGIN
  PERFORM mdame._require_not_null('account_id', p_account_id), mdame._require_not_null('day', p_day),
          mdame._require_range('units', p_units, 1, 2147483647), mdame._require_text('quota_key', p_quota_key);
  -- The account row serialises reservations for it (all days; they are rare).
  SELECT daily_quota_units INTO v_cap FROM dimension_accounts
   WHERE id = p_account_id FOR NO KEY UPDATE;
  IF v_cap IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  SELECT * INTO v_entry FROM quota_ledger WHERE quota_key = p_quota_key;
  IF v_entry.id IS NOT NULL THEN
    IF (v_entry.account_id, v_entry.day, v_entry.units) IS DISTINCT FROM (p_account_id, p_day, p_units) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: quota_key %L was reserved for account %s on %s, %s units',
                         p_quota_key, v_entry.account_id, v_entry.day, v_entry.units);
    END IF;
    RETURN v_entry.id;
  END IF;
  SELECT coalesce(sum(units) FILTER (WHERE state <> 'released'), 0) INTO v_used
    FROM quota_ledger WHERE account_id = p_account_id AND day = p_day;
  IF v_used + p_units > v_cap THEN
    RETURN NULL;
  END IF;
  INSERT INTO quota_ledger (account_id, day, quota_key, units)
  VALUES (p_account_id, p_day, p_quota_key, p_units)
  RETURNING id INTO v_entry.id;
  RETURN v_entry.id;
END
$$;

CREATE FUNCTION mdame._lock_quota_entry(p_quota_key text) RETURNS mdame.quota_ledger
LANGUAGE plpgsql AS $$
DECLARE
  v_entry mdame.quota_ledger;
BEGIN
  SELECT * INTO v_entry FROM mdame.quota_ledger
   WHERE quota_key = mdame._require_text('quota_key', p_quota_key) FOR UPDATE;
  IF v_entry.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: no quota reservation for quota_key %L', p_quota_key);
  END IF;
  RETURN v_entry;
END
$$;

-- Marks reserved units as used. Idempotent; a released reservation cannot be committed.
CREATE FUNCTION mdame.commit_quota(p_quota_key text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_entry quota_ledger := mdame._lock_quota_entry(p_quota_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: quota_key %L was released and cannot be committed', p_quota_key);
  ELSIF v_entry.state = 'reserved' THEN
    UPDATE quota_ledger SET state = 'committed', updated_at = now() WHERE id = v_entry.id;
  END IF;
  RETURN v_entry.id;
END
$$;

-- Gives reserved units back. true: released now; false: already released; committed: MD003.
CREATE FUNCTION mdame.release_quota(p_quota_key text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_entry quota_ledger := mdame._lock_quota_entry(p_quota_key);
BEGIN
  IF v_entry.state = 'released' THEN
    RETURN false;
  ELSIF v_entry.state = 'committed' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: quota_key %L is committed and cannot be released', p_quota_key);
  END IF;
  UPDATE quota_ledger SET state = 'released', updated_at = now() WHERE id = v_entry.id;
  RETURN true;
END
$$;

-- =============================================================================================
-- Provider attempts.
-- =============================================================================================
-- Records an attempt at an external call for a work key and returns its id. attempt_no counts
-- every attempt of the work key, across request hashes (a revised prompt does not reset it).
-- While the last attempt's outcome is not known ('submitted' with no outcome recorded, or
-- 'unknown'), a new attempt is refused with MD005: reconcile first, or a retry may double-post.
CREATE FUNCTION mdame.record_attempt(p_work_key text, p_provider text, p_request_hash text,
                               p_status text, p_detail jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

CREATE FUNCTION mdame._lock_attempt(p_attempt_id bigint) RETURNS mdame.provider_attempts
LANGUAGE plpgsql AS $$
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
$$;

-- Records the outcome of a 'submitted' attempt: succeeded, failed, or unknown (e.g. a timeout
-- after the request was sent). Repeating the same outcome is a no-op. Returns the status.
CREATE FUNCTION mdame.finish_attempt(p_attempt_id bigint, p_status text, p_detail jsonb DEFAULT '{}')
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- Settles an attempt whose outcome was not known (unknown, or submitted and never finished, as
-- after a crash) once the provider has been asked: succeeded or failed. Idempotent for the same
-- final status. Returns the status.
CREATE FUNCTION mdame.reconcile_attempt(p_attempt_id bigint, p_final_status text,
                                  p_detail jsonb DEFAULT '{}')
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- =============================================================================================
-- Reviews and safety decisions.
-- =============================================================================================
-- Records one check's verdict on a render file, bound to the file's SHA-256. Returns the id.
CREATE FUNCTION mdame.record_review(p_render_id bigint, p_content_sha256 text, p_check_name text,
                              p_verdict text, p_detail jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id),
          mdame._require_sha256('content_sha256', p_content_sha256),
          mdame._require_match('check_name', p_check_name, '^[a-z][a-z0-9_.-]{0,62}$'),
          mdame._require_one_of('verdict', p_verdict, ARRAY['approved', 'rejected']),
          mdame._require_json('detail', p_detail);
  IF NOT EXISTS (SELECT FROM renders WHERE id = p_render_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: render %s does not exist', p_render_id);
  END IF;
  INSERT INTO reviews (render_id, content_sha256, check_name, verdict, detail)
  VALUES (p_render_id, p_content_sha256, p_check_name, p_verdict, p_detail)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;

-- Approved means: the latest review of the render is of this very file, and the latest verdict
-- of every check on this file is 'approved'. A review of any other hash (a re-rendered or
-- tampered file) makes the old approval void.
CREATE FUNCTION mdame.is_approved(p_render_id bigint, p_content_sha256 text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id),
          mdame._require_sha256('content_sha256', p_content_sha256);
  IF NOT EXISTS (SELECT FROM renders WHERE id = p_render_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: render %s does not exist', p_render_id);
  END IF;
  RETURN coalesce((
    SELECT r.content_sha256 = p_content_sha256 FROM reviews r
     WHERE r.render_id = p_render_id ORDER BY r.id DESC LIMIT 1), false)
    AND coalesce((
      SELECT bool_and(latest.verdict = 'approved')
        FROM (SELECT DISTINCT ON (r.check_name) r.verdict FROM reviews r
               WHERE r.render_id = p_render_id AND r.content_sha256 = p_content_sha256
               ORDER BY r.check_name, r.id DESC) latest), false);
END
$$;

-- Appends a safety classifier's decision to the audit trail. verdict: allow | review | block;
-- reasons: a JSON array. Returns the id.
CREATE FUNCTION mdame.log_safety_decision(p_subject_kind text, p_subject_key text,
                                    p_dimension_slug text, p_verdict text, p_rule text,
                                    p_reasons jsonb, p_classifier text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint;
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('subject_kind', p_subject_kind, '^[a-z][a-z_]{0,40}$'),
          mdame._require_text('subject_key', p_subject_key),
          mdame._require_one_of('verdict', p_verdict, ARRAY['allow', 'review', 'block']),
          mdame._require_text('rule', p_rule, 200), mdame._require_json('reasons', p_reasons, 'array'),
          mdame._require_text('classifier', p_classifier, 200);
  IF p_dimension_slug IS NOT NULL THEN
    v_dimension := mdame._dimension_id(p_dimension_slug);
  END IF;
  INSERT INTO safety_audit_logs (subject_kind, subject_key, dimension_id, verdict, rule, reasons,
                                 classifier)
  VALUES (p_subject_kind, p_subject_key, v_dimension, p_verdict, p_rule, p_reasons, p_classifier)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;

-- Belt and braces on top of the default privileges from 0001.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA mdame TO mdame_app;
