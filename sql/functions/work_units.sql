-- Work units: created once per idempotency key, moved by checked transitions that log events.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE OR REPLACE FUNCTION mdame._work_kind(p_kind text)
 RETURNS mdame.work_kinds
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._work_kind(p_kind text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame.upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_json('payload', p_payload);
  PERFORM mdame._fence(mdame._payload_dimension(p_kind, p_payload), p_lock_token);
  RETURN mdame._upsert_work_unit(p_kind, p_idempotency_key, p_payload);
END
$function$;
REVOKE ALL ON FUNCTION mdame.upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb, p_lock_token bigint) TO mdame_app;

-- Locks the row and returns its state; raises MD006 when it does not exist.
CREATE OR REPLACE FUNCTION mdame._lock_work_unit(p_kind mdame.work_kinds, p_id bigint)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._lock_work_unit(p_kind mdame.work_kinds, p_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame.transition(p_kind text, p_id bigint, p_from_state text, p_to_state text, p_detail jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension(p_kind, p_id), p_lock_token);
  RETURN mdame._transition(p_kind, p_id, p_from_state, p_to_state, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.transition(p_kind text, p_id bigint, p_from_state text, p_to_state text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.transition(p_kind text, p_id bigint, p_from_state text, p_to_state text, p_detail jsonb, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension(p_kind, p_id), p_lock_token);
  RETURN mdame._bump_work_attempt(p_kind, p_id, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- The dimension a work unit belongs to: its own dimension_id, or its script's.
CREATE OR REPLACE FUNCTION mdame._unit_dimension(p_kind text, p_id bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._unit_dimension(p_kind text, p_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_state(p_kind text, p_id bigint, p_states text[])
 RETURNS text
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._require_state(p_kind text, p_id bigint, p_states text[]) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._bump_work_attempt(p_kind text, p_id bigint, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._transition(p_kind text, p_id bigint, p_from_state text, p_to_state text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._transition(p_kind text, p_id bigint, p_from_state text, p_to_state text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._upsert_work_unit(p_kind text, p_idempotency_key text, p_payload jsonb) FROM PUBLIC, mdame_app, mdame_admin;
