-- Voice HALT and its backoff retry.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Halts a script whose voice failed on every provider. Returns the time its voice may be
-- retried, or NULL when it is failed instead (a permanent cause, or the window closed).
CREATE OR REPLACE FUNCTION mdame.halt_voice(p_script_id bigint, p_reason text, p_permanent boolean, p_backoff_seconds double precision, p_backoff_max_seconds double precision, p_retry_until timestamp with time zone, p_lock_token bigint)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_halts integer;
  v_wait double precision;
  v_next timestamptz;
  v_reason text;
  v_error text;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  IF p_permanent IS NULL THEN
    PERFORM mdame._invalid('permanent must not be NULL');
  END IF;
  IF p_backoff_seconds IS NULL OR p_backoff_seconds <= 0 OR p_backoff_seconds > 604800 THEN
    PERFORM mdame._invalid(format('backoff_seconds must be in (0, 604800] (got %s)',
                                  p_backoff_seconds));
  END IF;
  IF p_backoff_max_seconds IS NULL OR p_backoff_max_seconds < p_backoff_seconds
     OR p_backoff_max_seconds > 604800 THEN
    PERFORM mdame._invalid(format('backoff_max_seconds must be in [backoff_seconds, 604800] '
                                  '(got %s)', p_backoff_max_seconds));
  END IF;
  IF p_retry_until IS NULL OR p_retry_until = 'infinity' THEN
    PERFORM mdame._invalid('retry_until must be a finite time');
  END IF;
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['voice_queued']);
  v_reason := left(p_reason, 500);
  SELECT halts + 1 INTO v_halts FROM voice_halts WHERE script_id = p_script_id FOR UPDATE;
  v_halts := coalesce(v_halts, 1);
  IF p_permanent THEN
    v_error := format('voice failed for good (a cause no retry can heal): %s', v_reason);
  ELSIF now() >= p_retry_until THEN
    v_error := format('voice failed on every provider and the retry window closed at %s UTC: %s',
                      to_char(p_retry_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), v_reason);
  ELSE
    -- 2^30 halts is far past any cap: the exponent stays small.
    v_wait := least(p_backoff_seconds * power(2, least(v_halts - 1, 30)), p_backoff_max_seconds);
    v_next := least(now() + v_wait * interval '1 second', p_retry_until);
  END IF;
  INSERT INTO voice_halts AS h (script_id, halts, max_halts, last_reason, halted_at,
                                next_retry_at, permanent, retry_until)
  VALUES (p_script_id, v_halts, NULL, v_reason, now(), v_next, p_permanent, p_retry_until)
  ON CONFLICT (script_id) DO UPDATE
     SET halts = EXCLUDED.halts, max_halts = NULL, last_reason = EXCLUDED.last_reason,
         halted_at = EXCLUDED.halted_at, next_retry_at = EXCLUDED.next_retry_at,
         permanent = EXCLUDED.permanent, retry_until = EXCLUDED.retry_until, updated_at = now();
  PERFORM mdame._transition('script', p_script_id, 'voice_queued', 'halted',
                            jsonb_build_object('reason', v_reason, 'voice_halts', v_halts,
                                               'permanent', p_permanent,
                                               'next_voice_retry_at', v_next));
  -- The alert: one event per halt, whoever watches the events table (a notifier) sees it.
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('script', p_script_id, 'voice_halted', 'voice_queued', 'halted',
          jsonb_build_object('reason', v_reason, 'halts', v_halts, 'permanent', p_permanent,
                             'retry_until', p_retry_until, 'next_retry_at', v_next));
  IF v_next IS NULL THEN
    PERFORM mdame._transition('script', p_script_id, 'halted', 'failed',
                              jsonb_build_object('error', v_error));
  END IF;
  RETURN v_next;
END
$function$;
REVOKE ALL ON FUNCTION mdame.halt_voice(p_script_id bigint, p_reason text, p_permanent boolean, p_backoff_seconds double precision, p_backoff_max_seconds double precision, p_retry_until timestamp with time zone, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.halt_voice(p_script_id bigint, p_reason text, p_permanent boolean, p_backoff_seconds double precision, p_backoff_max_seconds double precision, p_retry_until timestamp with time zone, p_lock_token bigint) TO mdame_app;

-- Sends a halted script back to voice_queued once its backoff has expired; MD009 before, MD003
-- when it is not halted or has no retry left. A script whose retry window has closed is failed
-- instead, with a reason saying so. Returns the script's new state.
CREATE OR REPLACE FUNCTION mdame.retry_halted_voice(p_script_id bigint, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_halt voice_halts;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['halted']);
  SELECT * INTO v_halt FROM voice_halts WHERE script_id = p_script_id FOR UPDATE;
  IF v_halt.script_id IS NULL OR v_halt.next_retry_at IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: script %s has no voice retry left', p_script_id);
  END IF;
  IF v_halt.next_retry_at > now() THEN
    RAISE EXCEPTION USING ERRCODE = 'MD009',
      MESSAGE = format('mdame: script %s: voice retry not due before %s (halt %s)',
                       p_script_id, v_halt.next_retry_at, v_halt.halts);
  END IF;
  UPDATE voice_halts SET retried_at = now(), updated_at = now() WHERE script_id = p_script_id;
  IF v_halt.retry_until IS NOT NULL AND now() >= v_halt.retry_until THEN
    UPDATE voice_halts SET next_retry_at = NULL WHERE script_id = p_script_id;
    PERFORM mdame._transition('script', p_script_id, 'halted', 'failed',
      jsonb_build_object('error', format(
        'voice not retried: the retry window closed at %s UTC after %s halt(s); last cause: %s',
        to_char(v_halt.retry_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), v_halt.halts,
        v_halt.last_reason)));
    RETURN 'failed';
  END IF;
  PERFORM mdame._transition('script', p_script_id, 'halted', 'voice_queued',
                            jsonb_build_object('voice_retry', v_halt.halts));
  RETURN 'voice_queued';
END
$function$;
REVOKE ALL ON FUNCTION mdame.retry_halted_voice(p_script_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.retry_halted_voice(p_script_id bigint, p_lock_token bigint) TO mdame_app;
