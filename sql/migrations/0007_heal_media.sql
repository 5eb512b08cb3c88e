-- 0007: voice tracks and renders whose file vanished or rotted heal, as clips do since 0006.
--
-- requeue_voice fails the script's damaged voice track and sends the script back to
-- 'visuals_ready'; requeue_render fails its damaged render and sends it back to 'voiced'. Each is
-- one phase. The stage then makes the unit again under the next key of its series (the failed
-- unit keeps its key and its history); record_voice and record_render set the script's
-- voice_track_id and render_id, so later stages follow the unit that is actually current.
--
-- A render is only remade while no publication of the script exists: a publication names the
-- render's bytes (content_sha256), and a second render need not be byte-identical.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

UPDATE work_states SET is_terminal = false
 WHERE (kind, state) IN (('voice_track', 'ready'), ('render', 'approved'));
INSERT INTO allowed_transitions (kind, from_state, to_state) VALUES
  ('voice_track', 'ready', 'failed'),
  ('render', 'approved', 'failed'),
  ('script', 'voiced', 'visuals_ready'),
  ('script', 'render_queued', 'visuals_ready'),
  ('script', 'rendered', 'voiced'),
  ('script', 'publishing', 'voiced');

-- The caller names the damaged unit it found; it must be the script's and still in p_state.
CREATE FUNCTION mdame._unit_of_script(p_kind text, p_id bigint, p_script_id bigint, p_state text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_kind work_kinds := mdame._work_kind(p_kind);
  v_script bigint;
BEGIN
  EXECUTE format('SELECT script_id FROM %I WHERE id = $1', v_kind.table_name)
     INTO v_script USING p_id;
  IF v_script IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('%s %s is not a %s of script %s', p_kind, p_id, p_kind,
                                  p_script_id));
  END IF;
  PERFORM mdame._require_state(p_kind, p_id, ARRAY[p_state]);
END
$$;

-- From 'voice_queued' (a stage that finds the track it made earlier damaged) the script stays
-- there and is voiced anew in the same pass; from later states it goes back to 'visuals_ready'.
CREATE FUNCTION mdame.requeue_voice(p_script_id bigint, p_voice_track_id bigint, p_reason text,
                                    p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
                                  ARRAY['voice_queued', 'voiced', 'render_queued']);
  PERFORM mdame._unit_of_script('voice_track', p_voice_track_id, p_script_id, 'ready');
  PERFORM mdame._transition('voice_track', p_voice_track_id, 'ready', 'failed',
                            jsonb_build_object('reason', left(p_reason, 500)));
  IF v_state = 'voice_queued' THEN
    RETURN v_state;
  END IF;
  PERFORM mdame._transition('script', p_script_id, v_state, 'visuals_ready',
                            jsonb_build_object('healing', left(p_reason, 500)));
  RETURN 'visuals_ready';
END
$$;

CREATE FUNCTION mdame.requeue_render(p_script_id bigint, p_render_id bigint, p_reason text,
                                     p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_state text;
  v_publications bigint[];
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id, ARRAY['rendered', 'publishing']);
  SELECT array_agg(id ORDER BY id) INTO v_publications
    FROM publications WHERE script_id = p_script_id;
  IF v_publications IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: script %s has publications %s that name its render''s bytes; '
                       'a new render could differ, so it is not remade: restore the file or '
                       'fail the script', p_script_id, v_publications);
  END IF;
  PERFORM mdame._unit_of_script('render', p_render_id, p_script_id, 'approved');
  PERFORM mdame._transition('render', p_render_id, 'approved', 'failed',
                            jsonb_build_object('reason', left(p_reason, 500)));
  PERFORM mdame._transition('script', p_script_id, v_state, 'voiced',
                            jsonb_build_object('healing', left(p_reason, 500)));
  RETURN 'voiced';
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.requeue_voice(bigint, bigint, text, bigint),
  mdame.requeue_render(bigint, bigint, text, bigint)
TO mdame_app;
