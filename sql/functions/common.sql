-- Helpers shared by several families: argument checks, fencing, transitions and the work-unit core.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE OR REPLACE FUNCTION mdame._invalid(p_message text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD001', MESSAGE = 'mdame: ' || p_message;
END
$function$;
REVOKE ALL ON FUNCTION mdame._invalid(p_message text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_text(p_name text, p_value text, p_max integer DEFAULT 512)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL OR p_value = '' THEN
    PERFORM mdame._invalid(format('%s must not be NULL or empty', p_name));
  ELSIF length(p_value) > p_max THEN
    PERFORM mdame._invalid(format('%s is longer than %s characters', p_name, p_max));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_text(p_name text, p_value text, p_max integer) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_match(p_name text, p_value text, p_pattern text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL OR p_value !~ p_pattern THEN
    PERFORM mdame._invalid(format('%s %s does not match %s', p_name, mdame._clip(p_value), p_pattern));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_match(p_name text, p_value text, p_pattern text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_one_of(p_name text, p_value text, p_allowed text[])
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL OR NOT (p_value = ANY (p_allowed)) THEN
    PERFORM mdame._invalid(format('%s must be one of %s (got %s)', p_name,
                            array_to_string(p_allowed, ', '), mdame._clip(p_value)));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_one_of(p_name text, p_value text, p_allowed text[]) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_sha256(p_name text, p_value text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL OR p_value !~ '^[0-9a-f]{64}$' THEN
    PERFORM mdame._invalid(format('%s must be a lowercase hex SHA-256 (got %s)', p_name,
                            mdame._clip(p_value)));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_sha256(p_name text, p_value text) FROM PUBLIC, mdame_app, mdame_admin;

-- Payloads are immutable inputs that travel with every read: keep them bounded.
CREATE OR REPLACE FUNCTION mdame._require_json(p_name text, p_value jsonb, p_type text DEFAULT 'object'::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._require_json(p_name text, p_value jsonb, p_type text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_range(p_name text, p_value bigint, p_min bigint, p_max bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL THEN
    PERFORM mdame._invalid(format('%s must not be NULL', p_name));
  ELSIF p_value < p_min OR p_value > p_max THEN
    PERFORM mdame._invalid(format('%s must be between %s and %s (got %s)', p_name, p_min, p_max, p_value));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_range(p_name text, p_value bigint, p_min bigint, p_max bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_not_null(p_name text, p_value anyelement)
 RETURNS anyelement
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_value IS NULL THEN
    PERFORM mdame._invalid(format('%s must not be NULL', p_name));
  END IF;
  RETURN p_value;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_not_null(p_name text, p_value anyelement) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._dimension_id(p_slug text)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._dimension_id(p_slug text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._seconds(p_name text, p_value integer)
 RETURNS interval
 LANGUAGE sql
 IMMUTABLE
AS $function$
  -- Leases, TTLs and delays: at least a second, at most a year.
  SELECT mdame._require_range(p_name, p_value, 1, 31622400) * interval '1 second'
$function$;
REVOKE ALL ON FUNCTION mdame._seconds(p_name text, p_value integer) FROM PUBLIC, mdame_app, mdame_admin;

-- The value quoted as a literal, cut to p_max characters with an ellipsis and its full length,
-- so a 100 kB key cannot turn one error into a 100 kB log line.
CREATE OR REPLACE FUNCTION mdame._clip(p_value text, p_max integer DEFAULT 80)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT CASE
    WHEN p_value IS NULL THEN 'NULL'
    WHEN length(p_value) <= p_max THEN quote_literal(p_value)
    ELSE quote_literal(left(p_value, p_max)) || format('... (%s characters)', length(p_value))
  END
$function$;
REVOKE ALL ON FUNCTION mdame._clip(p_value text, p_max integer) FROM PUBLIC, mdame_app, mdame_admin;

-- A pipeline lock's holder proves itself with the secret acquire_pipeline_lock handed it: every
-- RPC's lock token argument (p_lock_token, p_token) is that secret, never the lock's public
-- token. Only its SHA-256 is stored, so nothing the app role reads gives it away.
CREATE OR REPLACE FUNCTION mdame._lock_secret_sha256(p_secret bigint)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT sha256(int8send(p_secret))
$function$;
REVOKE ALL ON FUNCTION mdame._lock_secret_sha256(p_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- A fresh secret: 63 bits from the server's strong random source (gen_random_uuid's), positive
-- so that it travels as any bigint argument does.
CREATE OR REPLACE FUNCTION mdame._new_secret()
 RETURNS bigint
 LANGUAGE sql
 VOLATILE
AS $function$
  SELECT ('x' || encode(substr(sha256(uuid_send(gen_random_uuid())), 1, 8), 'hex'))::bit(64)::bigint
         & 9223372036854775807
$function$;
REVOKE ALL ON FUNCTION mdame._new_secret() FROM PUBLIC, mdame_app, mdame_admin;

-- The public token of the lock p_secret is the secret of, or NULL: what an error names, since a
-- message must never carry the secret.
CREATE OR REPLACE FUNCTION mdame._secret_token(p_secret bigint)
 RETURNS bigint
 LANGUAGE sql
 STABLE
AS $function$
  SELECT token FROM mdame.system_locks WHERE secret_sha256 = mdame._lock_secret_sha256(p_secret)
$function$;
REVOKE ALL ON FUNCTION mdame._secret_token(p_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Raises MD007 unless p_secret is the secret of the live holder of the dimension's pipeline
-- lock. Returns the lock's public token: what the work done under it records.
CREATE OR REPLACE FUNCTION mdame._fence(p_dimension_id bigint, p_secret bigint)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_slug text;
  v_lock mdame.system_locks;
  v_mine boolean;
BEGIN
  IF p_secret IS NULL THEN
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
  v_mine := v_lock.secret_sha256 = mdame._lock_secret_sha256(p_secret);
  IF v_mine IS NOT TRUE OR v_lock.released_at IS NOT NULL OR v_lock.expires_at <= now() THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = format('mdame: fenced: lock token %s does not hold %s (%s)',
                       coalesce(mdame._secret_token(p_secret)::text, 'of no current lock'),
                       mdame.dimension_lock_name(v_slug),
                       CASE WHEN v_lock.token IS NULL THEN 'never acquired'
                            WHEN v_mine IS NOT TRUE THEN format('now token %s', v_lock.token)
                            WHEN v_lock.released_at IS NOT NULL THEN 'released'
                            ELSE 'expired' END);
  END IF;
  RETURN v_lock.token;
END
$function$;
REVOKE ALL ON FUNCTION mdame._fence(p_dimension_id bigint, p_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- The fence of a paid call: the dimension's pipeline lock, or a scene's visuals lock of that
-- dimension (`pipeline:<slug>/visuals:<scene_hash>`), which a scene step on any host holds
-- while its engines pay for pictures and judgements (parallel scene steps hold no dimension
-- lock). Raises MD007 otherwise; returns the lock's public token.
CREATE OR REPLACE FUNCTION mdame._paid_fence(p_dimension_id bigint, p_secret bigint)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_lock mdame.system_locks;
  v_prefix text;
BEGIN
  IF p_secret IS NOT NULL THEN
    SELECT * INTO v_lock FROM mdame.system_locks
     WHERE secret_sha256 = mdame._lock_secret_sha256(p_secret) FOR SHARE;
    v_prefix := mdame.dimension_lock_name((SELECT slug FROM mdame.dimensions
                                            WHERE id = p_dimension_id)) || '/visuals:';
    IF v_lock.token IS NOT NULL AND v_lock.released_at IS NULL AND v_lock.expires_at > now()
       AND left(v_lock.lock_name, length(v_prefix)) = v_prefix THEN
      RETURN v_lock.token;
    END IF;
  END IF;
  RETURN mdame._fence(p_dimension_id, p_secret);
END
$function$;
REVOKE ALL ON FUNCTION mdame._paid_fence(p_dimension_id bigint, p_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Raises MD007 unless p_secret is the secret of some live lock's holder (for work without a
-- dimension). Returns that lock.
CREATE OR REPLACE FUNCTION mdame._fence_token(p_secret bigint)
 RETURNS mdame.system_locks
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_lock mdame.system_locks;
BEGIN
  SELECT * INTO v_lock FROM mdame.system_locks
   WHERE secret_sha256 = mdame._lock_secret_sha256(p_secret) FOR SHARE;
  IF v_lock.token IS NULL OR v_lock.released_at IS NOT NULL OR v_lock.expires_at <= now() THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = format('mdame: fenced: lock token %s is not a live lock token',
                       CASE WHEN p_secret IS NULL THEN 'NULL'
                            ELSE coalesce(v_lock.token::text, 'of no current lock') END);
  END IF;
  RETURN v_lock;
END
$function$;
REVOKE ALL ON FUNCTION mdame._fence_token(p_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._payload_dimension(p_kind text, p_payload jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._payload_dimension(p_kind text, p_payload jsonb) FROM PUBLIC, mdame_app, mdame_admin;
