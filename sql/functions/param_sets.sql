-- Versioned parameter sets: a dimension's tuned parameters and their rollback.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- The engine's hard bound on the hook threshold, whatever a YAML or a caller allows.
CREATE OR REPLACE FUNCTION mdame._param_hook_bounds()
 RETURNS numeric[]
 LANGUAGE sql
 IMMUTABLE
AS $function$ SELECT ARRAY[0.70, 0.80]::numeric[] $function$;
REVOKE ALL ON FUNCTION mdame._param_hook_bounds() FROM PUBLIC, mdame_app, mdame_admin;

-- p_limits.<name> as [min, max] numbers; MD001 naming the field when missing or malformed.
CREATE OR REPLACE FUNCTION mdame._param_limit(p_limits jsonb, p_name text)
 RETURNS numeric[]
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_lim jsonb := p_limits -> p_name;
BEGIN
  IF v_lim IS NULL OR jsonb_typeof(v_lim) <> 'object'
     OR jsonb_typeof(v_lim -> 'min') IS DISTINCT FROM 'number'
     OR jsonb_typeof(v_lim -> 'max') IS DISTINCT FROM 'number'
     OR (v_lim ->> 'min')::numeric > (v_lim ->> 'max')::numeric THEN
    PERFORM mdame._invalid(format('limits.%s must be {"min": number, "max": number} with min <= max',
                                  p_name));
  END IF;
  RETURN ARRAY[(v_lim ->> 'min')::numeric, (v_lim ->> 'max')::numeric];
END
$function$;
REVOKE ALL ON FUNCTION mdame._param_limit(p_limits jsonb, p_name text) FROM PUBLIC, mdame_app, mdame_admin;

-- One numeric parameter: a number (an integer where p_integer), inside [min, max], and at most
-- p_step away from the current set's value (when there is one).
CREATE OR REPLACE FUNCTION mdame._check_param(p_name text, p_value jsonb, p_bounds numeric[], p_integer boolean, p_current jsonb, p_step jsonb)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v numeric;
BEGIN
  IF jsonb_typeof(p_value) IS DISTINCT FROM 'number' THEN
    PERFORM mdame._invalid(format('params.%s must be a number (got %s)', p_name,
                                  coalesce(jsonb_typeof(p_value), 'nothing')));
  END IF;
  v := p_value::text::numeric;
  IF p_integer AND v <> trunc(v) THEN
    PERFORM mdame._invalid(format('params.%s must be a whole number (got %s)', p_name, v));
  END IF;
  IF v < p_bounds[1] OR v > p_bounds[2] THEN
    PERFORM mdame._invalid(format('params.%s = %s is outside its limits [%s, %s]', p_name, v,
                                  p_bounds[1], p_bounds[2]));
  END IF;
  IF p_current IS NOT NULL AND jsonb_typeof(p_current) = 'number' AND p_step IS NOT NULL
     AND abs(v - p_current::text::numeric) > p_step::text::numeric + 1e-9 THEN
    PERFORM mdame._invalid(format('params.%s moves from %s to %s, more than the weekly step %s',
                                  p_name, p_current::text, v, p_step::text));
  END IF;
END
$function$;
REVOKE ALL ON FUNCTION mdame._check_param(p_name text, p_value jsonb, p_bounds numeric[], p_integer boolean, p_current jsonb, p_step jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- The dimension's current version (highest not rolled back), or NULL.
CREATE OR REPLACE FUNCTION mdame._current_param_set(p_dimension_id bigint)
 RETURNS mdame.param_sets
 LANGUAGE sql
 STABLE
AS $function$
  SELECT * FROM mdame.param_sets
   WHERE dimension_id = p_dimension_id AND rolled_back_at IS NULL
   ORDER BY version DESC LIMIT 1
$function$;
REVOKE ALL ON FUNCTION mdame._current_param_set(p_dimension_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- The limits the dimension was registered with (its stored config's `adaptive` block, as the
-- registry sync wrote it from the YAML with the defaults applied: mdame_domain/adaptive.py
-- parse_adaptive is their one source), in the shape apply_param_set stores: {name: {min, max}}
-- for hook_threshold, videos_per_day, trend_volume_gate and category_weight, and weekly_step
-- {name: step}. MD006 when the stored config has no such block (registered before it existed:
-- `mdame dimensions sync` registers it again); MD003 when the YAML disables the engine.
CREATE OR REPLACE FUNCTION mdame._registered_param_limits(p_dimension_id bigint)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
  v_slug text;
  v_adaptive jsonb;
  v_name text;
  v_pair jsonb;
  v_step jsonb;
  v_limits jsonb := '{}'::jsonb;
  v_steps jsonb := '{}'::jsonb;
BEGIN
  SELECT d.slug, d.config -> 'adaptive' INTO v_slug, v_adaptive
    FROM mdame.dimensions d WHERE d.id = p_dimension_id;
  IF v_adaptive IS NULL OR jsonb_typeof(v_adaptive) <> 'object' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: dimension %L has no registered adaptive limits (config.adaptive): '
                       'register it again with `mdame dimensions sync`', v_slug);
  END IF;
  IF v_adaptive -> 'enabled' = 'false'::jsonb THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: dimension %L disables the Adaptive Engine (adaptive.enabled: '
                       'false in its YAML)', v_slug);
  END IF;
  FOREACH v_name IN ARRAY ARRAY['hook_threshold', 'videos_per_day', 'trend_volume_gate',
                                'category_weight'] LOOP
    v_pair := v_adaptive -> v_name;
    v_step := v_adaptive -> ('step_' || v_name);
    IF jsonb_typeof(v_pair) IS DISTINCT FROM 'array' OR jsonb_array_length(v_pair) <> 2
       OR jsonb_typeof(v_pair -> 0) <> 'number' OR jsonb_typeof(v_pair -> 1) <> 'number'
       OR jsonb_typeof(v_step) IS DISTINCT FROM 'number' OR (v_step #>> '{}')::numeric < 0 THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006',
        MESSAGE = format('mdame: dimension %L has no registered adaptive.%s [min, max] and '
                         'adaptive.step_%s: register it again with `mdame dimensions sync`',
                         v_slug, v_name, v_name);
    END IF;
    v_limits := v_limits || jsonb_build_object(
      v_name, jsonb_build_object('min', v_pair -> 0, 'max', v_pair -> 1));
    v_steps := v_steps || jsonb_build_object(v_name, v_step);
  END LOOP;
  RETURN v_limits || jsonb_build_object('weekly_step', v_steps);
END
$function$;
REVOKE ALL ON FUNCTION mdame._registered_param_limits(p_dimension_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Writes a new version of the dimension's parameter set for the week, derived from the current
-- one, under the dimension's pipeline lock (the Adaptive Engine's step holds it). p_params holds
-- any of hook_threshold, videos_per_day, trend_volume_gate and category_weights ({category:
-- weight}). The hard limits and weekly steps are the dimension's registered ones
-- (_registered_param_limits: the caller cannot widen them) and are stored with the set.
-- Refused (MD001, naming the field): a value outside its limits (the hook threshold also
-- outside [0.70, 0.80]), a move larger than the weekly step from the current set, an unknown
-- parameter. Refused (MD003): a second, different set for a week that already has one, or a
-- dimension whose YAML disables the engine. The same proposal again returns its version with
-- created = false.
CREATE OR REPLACE FUNCTION mdame.apply_param_set(p_dimension_slug text, p_week_start date, p_effective_from date, p_params jsonb, p_changes jsonb, p_explanation text, p_lock_token bigint)
 RETURNS TABLE(version integer, created boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_dim bigint;
  v_cur mdame.param_sets;
  v_old mdame.param_sets;
  v_key text;
  v_value jsonb;
  v_steps jsonb;
  v_hook numeric[];
  v_weight numeric[];
  v_version integer;
  v_limits jsonb;
BEGIN
  v_dim := mdame._dimension_id(p_dimension_slug);
  PERFORM mdame._fence(v_dim, p_lock_token);
  PERFORM mdame._require_not_null('week_start', p_week_start),
          mdame._require_not_null('effective_from', p_effective_from),
          mdame._require_json('params', p_params),
          mdame._require_json('changes', p_changes, 'array'),
          mdame._require_text('explanation', p_explanation, 20000);
  IF p_effective_from <= p_week_start THEN
    PERFORM mdame._invalid(format('effective_from %s must be after week_start %s',
                                  p_effective_from, p_week_start));
  END IF;
  IF p_params = '{}'::jsonb THEN
    PERFORM mdame._invalid('params must name at least one parameter');
  END IF;
  -- Versions are numbered per dimension: serialise writers on the dimension's row.
  PERFORM 1 FROM mdame.dimensions WHERE id = v_dim FOR UPDATE;
  SELECT * INTO v_old FROM mdame.param_sets s
   WHERE s.dimension_id = v_dim AND s.week_start = p_week_start;
  IF FOUND THEN
    IF v_old.params = p_params THEN
      RETURN QUERY SELECT v_old.version, false;
      RETURN;
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: dimension %L already has a parameter change for the week of %s '
                       '(version %s): one change a week', p_dimension_slug, p_week_start,
                       v_old.version);
  END IF;
  v_cur := mdame._current_param_set(v_dim);
  v_limits := mdame._registered_param_limits(v_dim);
  v_steps := v_limits -> 'weekly_step';
  v_hook := mdame._param_limit(v_limits, 'hook_threshold');
  -- The hook threshold lives inside [0.70, 0.80] and inside what the YAML allows.
  v_hook := ARRAY[greatest(v_hook[1], (mdame._param_hook_bounds())[1]),
                  least(v_hook[2], (mdame._param_hook_bounds())[2])];
  FOR v_key, v_value IN SELECT * FROM jsonb_each(p_params) LOOP
    CASE v_key
      WHEN 'hook_threshold' THEN
        PERFORM mdame._check_param(v_key, v_value, v_hook, false,
                                   v_cur.params -> v_key, v_steps -> v_key);
      WHEN 'videos_per_day' THEN
        PERFORM mdame._check_param(v_key, v_value,
                                   mdame._param_limit(v_limits, v_key), true,
                                   v_cur.params -> v_key, v_steps -> v_key);
        PERFORM mdame._check_param(v_key, v_value, ARRAY[1, 10]::numeric[], true, NULL, NULL);
      WHEN 'trend_volume_gate' THEN
        PERFORM mdame._check_param(v_key, v_value,
                                   mdame._param_limit(v_limits, v_key), true,
                                   v_cur.params -> v_key, v_steps -> v_key);
        PERFORM mdame._check_param(v_key, v_value, ARRAY[0, 50]::numeric[], true, NULL, NULL);
      WHEN 'category_weights' THEN
        IF jsonb_typeof(v_value) <> 'object' THEN
          PERFORM mdame._invalid('params.category_weights must be an object {category: weight}');
        END IF;
        v_weight := mdame._param_limit(v_limits, 'category_weight');
        IF (SELECT count(*) FROM jsonb_object_keys(v_value)) > 200 THEN
          PERFORM mdame._invalid('params.category_weights has more than 200 categories');
        END IF;
        DECLARE
          v_cat text;
          v_w jsonb;
        BEGIN
          FOR v_cat, v_w IN SELECT * FROM jsonb_each(v_value) LOOP
            IF v_cat !~ '^[a-z0-9][a-z0-9 _-]{0,79}$' THEN
              PERFORM mdame._invalid(format('params.category_weights: %L is not a category name',
                                            left(v_cat, 100)));
            END IF;
            PERFORM mdame._check_param('category_weights.' || v_cat, v_w, v_weight, false,
                                       v_cur.params -> v_key -> v_cat,
                                       v_steps -> 'category_weight');
          END LOOP;
        END;
      ELSE
        PERFORM mdame._invalid(format('params.%s is not a tunable parameter (hook_threshold, '
                                      'videos_per_day, trend_volume_gate, category_weights)',
                                      left(v_key, 100)));
    END CASE;
  END LOOP;
  SELECT coalesce(max(s.version), 0) + 1 INTO v_version
    FROM mdame.param_sets s WHERE s.dimension_id = v_dim;
  INSERT INTO mdame.param_sets (dimension_id, version, parent_version, week_start, effective_from,
                                params, limits, changes, explanation)
  VALUES (v_dim, v_version, v_cur.version, p_week_start, p_effective_from, p_params, v_limits,
          p_changes, p_explanation);
  RETURN QUERY SELECT v_version, true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.apply_param_set(p_dimension_slug text, p_week_start date, p_effective_from date, p_params jsonb, p_changes jsonb, p_explanation text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.apply_param_set(p_dimension_slug text, p_week_start date, p_effective_from date, p_params jsonb, p_changes jsonb, p_explanation text, p_lock_token bigint) TO mdame_app;

-- Rolls back the dimension's current version: the one before it (or, after the first, the
-- YAML's values: version 0) is current again, and for every day. Returns the version now current.
-- MD006 when the dimension has no set left to roll back.
CREATE OR REPLACE FUNCTION mdame.rollback_param_set(p_dimension_slug text, p_reason text)
 RETURNS TABLE(rolled_back integer, current_version integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dim bigint;
  v_cur mdame.param_sets;
BEGIN
  v_dim := mdame._dimension_id(p_dimension_slug);
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM 1 FROM mdame.dimensions WHERE id = v_dim FOR UPDATE;
  v_cur := mdame._current_param_set(v_dim);
  IF v_cur.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: dimension %L has no parameter set to roll back (it runs on its '
                       'YAML values)', p_dimension_slug);
  END IF;
  UPDATE mdame.param_sets SET rolled_back_at = now(), rollback_reason = p_reason
   WHERE id = v_cur.id;
  RETURN QUERY SELECT v_cur.version, coalesce((mdame._current_param_set(v_dim)).version, 0);
END
$function$;
REVOKE ALL ON FUNCTION mdame.rollback_param_set(p_dimension_slug text, p_reason text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.rollback_param_set(p_dimension_slug text, p_reason text) TO mdame_admin;
