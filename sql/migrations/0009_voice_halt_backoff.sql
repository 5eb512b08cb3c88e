-- 0009: HALT with a backoff retry for voice.
--
-- When every voice provider fails, halt_voice moves the script voice_queued -> halted with the
-- reason, records the halt in voice_halts with the time its voice may be retried (an
-- exponential backoff: base * 2^(halts-1)) and appends a 'voice_halted' event for alerting,
-- in one phase. A later run of the partition calls retry_halted_voice, which moves it
-- halted -> voice_queued once that time has passed (voice only: nothing upstream is redone),
-- and refuses before (MD009). After the last allowed halt there is no retry: the script goes
-- on to failed in the same phase, so nothing waits forever.
--
-- halted is no longer terminal (it waits for its retry); like every non-terminal state it
-- may fail.
--
-- New error class: MD009 retry not due (a backoff has not expired yet).

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

UPDATE work_states SET is_terminal = false WHERE kind = 'script' AND state = 'halted';
INSERT INTO allowed_transitions (kind, from_state, to_state) VALUES
  ('script', 'halted', 'voice_queued'),
  ('script', 'halted', 'failed');

CREATE TABLE voice_halts (
  script_id     bigint PRIMARY KEY REFERENCES scripts (id),
  halts         integer NOT NULL CHECK (halts >= 1),
  max_halts     integer NOT NULL CHECK (max_halts >= 1),
  last_reason   text NOT NULL,
  halted_at     timestamptz NOT NULL,
  next_retry_at timestamptz,  -- NULL: no retry left
  retried_at    timestamptz,
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX voice_halts_due_idx ON voice_halts (next_retry_at) WHERE next_retry_at IS NOT NULL;
GRANT SELECT ON mdame.voice_halts TO mdame_app;
ALTER TABLE mdame.voice_halts ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON mdame.voice_halts FOR SELECT TO mdame_app USING (true);

-- Halts a script whose voice failed on every provider. Returns the time its voice may be
-- retried, or NULL when no retry is left (the script is then failed).
CREATE FUNCTION mdame.halt_voice(p_script_id bigint, p_reason text, p_backoff_base_seconds integer,
                                 p_max_halts integer, p_lock_token bigint)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_halts integer;
  v_next timestamptz;
  v_reason text;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000),
          mdame._require_range('backoff_base_seconds', p_backoff_base_seconds, 1, 604800),
          mdame._require_range('max_halts', p_max_halts, 1, 20);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['voice_queued']);
  v_reason := left(p_reason, 500);
  SELECT halts + 1 INTO v_halts FROM voice_halts WHERE script_id = p_script_id FOR UPDATE;
  v_halts := coalesce(v_halts, 1);
  IF v_halts < p_max_halts THEN
    v_next := now() + p_backoff_base_seconds * power(2, v_halts - 1) * interval '1 second';
  END IF;
  INSERT INTO voice_halts AS h (script_id, halts, max_halts, last_reason, halted_at, next_retry_at)
  VALUES (p_script_id, v_halts, p_max_halts, v_reason, now(), v_next)
  ON CONFLICT (script_id) DO UPDATE
     SET halts = EXCLUDED.halts, max_halts = EXCLUDED.max_halts,
         last_reason = EXCLUDED.last_reason, halted_at = EXCLUDED.halted_at,
         next_retry_at = EXCLUDED.next_retry_at, updated_at = now();
  PERFORM mdame._transition('script', p_script_id, 'voice_queued', 'halted',
                            jsonb_build_object('reason', v_reason, 'voice_halts', v_halts,
                                               'next_voice_retry_at', v_next));
  -- The alert: one event per halt, whoever watches the events table (a notifier) sees it.
  INSERT INTO events (subject_kind, subject_id, event, from_state, to_state, detail)
  VALUES ('script', p_script_id, 'voice_halted', 'voice_queued', 'halted',
          jsonb_build_object('reason', v_reason, 'halts', v_halts, 'max_halts', p_max_halts,
                             'next_retry_at', v_next));
  IF v_next IS NULL THEN
    PERFORM mdame._transition('script', p_script_id, 'halted', 'failed',
              jsonb_build_object('error', format('voice failed on every provider %s times; no '
                                                 'retry left: %s', v_halts, v_reason)));
  END IF;
  RETURN v_next;
END
$$;

-- Sends a halted script back to voice_queued once its backoff has expired; MD009 before, MD003
-- when it is not halted or has no retry left. Returns the script's new state.
CREATE FUNCTION mdame.retry_halted_voice(p_script_id bigint, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
      MESSAGE = format('mdame: script %s: voice retry not due before %s (halt %s of %s)',
                       p_script_id, v_halt.next_retry_at, v_halt.halts, v_halt.max_halts);
  END IF;
  UPDATE voice_halts SET retried_at = now(), updated_at = now() WHERE script_id = p_script_id;
  PERFORM mdame._transition('script', p_script_id, 'halted', 'voice_queued',
                            jsonb_build_object('voice_retry', v_halt.halts));
  RETURN 'voice_queued';
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.halt_voice(bigint, text, integer, integer, bigint),
  mdame.retry_halted_voice(bigint, bigint)
TO mdame_app;
