-- 0006: scenes whose clip vanished or rotted after their script moved past planning heal.
--
-- requeue_scenes sends the named ready scenes back to the GPU queue (a fresh job each, the dead
-- cache entry dropped with an event) and the script back to 'planned', in one phase; the hop
-- sensor then runs scene_clips for the partition and the script walks on from there. A scene
-- remembers the key of its current job (result.job_key) so the clip stage and finish_visuals
-- follow the job that will actually make its clip.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- A ready scene is no longer final: its clip can vanish and be made again. Like every
-- non-terminal state it may fail.
UPDATE work_states SET is_terminal = false WHERE kind = 'scene' AND state = 'ready';
INSERT INTO allowed_transitions (kind, from_state, to_state) VALUES
  ('scene', 'ready', 'queued'),
  ('scene', 'ready', 'failed'),
  ('script', 'visuals_ready', 'planned'),
  ('script', 'voice_queued', 'planned'),
  ('script', 'voiced', 'planned'),
  ('script', 'render_queued', 'planned');

-- The key of the job that makes a scene's clip now.
CREATE FUNCTION mdame._scene_job_key(p_scene mdame.scenes) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(p_scene.result ->> 'job_key', p_scene.idempotency_key)
$$;

CREATE OR REPLACE FUNCTION mdame.finish_visuals(p_script_id bigint, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dead bigint[];
  v_waiting integer;
  v_scene bigint;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_state('script', p_script_id, ARRAY['planned']);
  SELECT array_agg(s.id ORDER BY s.id) FILTER (WHERE j.state IN ('dead', 'failed')),
         count(*) FILTER (WHERE s.state <> 'ready')
    INTO v_dead, v_waiting
    FROM scenes s LEFT JOIN jobs j ON j.idempotency_key = mdame._scene_job_key(s)
   WHERE s.script_id = p_script_id AND s.state <> 'ready';
  IF v_dead IS NOT NULL THEN
    FOREACH v_scene IN ARRAY v_dead LOOP
      PERFORM mdame._transition('scene', v_scene, mdame._lock_work_unit(mdame._work_kind('scene'), v_scene),
                                'failed', '{"reason": "job dead after max attempts"}');
    END LOOP;
    PERFORM mdame._transition('script', p_script_id, 'planned', 'failed',
                              jsonb_build_object('failed_scenes', to_jsonb(v_dead)));
    RETURN 'failed';
  ELSIF v_waiting = 0 THEN
    PERFORM mdame._transition('script', p_script_id, 'planned', 'visuals_ready', '{}');
    RETURN 'visuals_ready';
  END IF;
  RETURN 'planned';
END
$$;

-- p_scenes: an array of {"scene_id", "job": {...job payload}}. Returns the jobs enqueued.
CREATE FUNCTION mdame.requeue_scenes(p_script_id bigint, p_scenes jsonb, p_reason text,
                                     p_job_type text, p_max_attempts integer,
                                     p_partition_key text, p_lock_token bigint)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_state text;
  v_item jsonb;
  v_scene scenes;
  v_key text;
  v_queued integer := 0;
BEGIN
  PERFORM mdame._require_json('scenes', p_scenes, 'array'),
          mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  v_state := mdame._require_state('script', p_script_id,
               ARRAY['visuals_ready', 'voice_queued', 'voiced', 'render_queued']);
  IF jsonb_array_length(p_scenes) = 0 THEN
    PERFORM mdame._invalid(format('script %s: no scene to requeue', p_script_id));
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_scenes) LOOP
    SELECT * INTO v_scene FROM scenes
     WHERE id = (v_item ->> 'scene_id')::bigint AND script_id = p_script_id FOR UPDATE;
    IF v_scene.id IS NULL THEN
      PERFORM mdame._invalid(format('scene %s is not a scene of script %s',
                                    mdame._clip(v_item ->> 'scene_id', 40), p_script_id));
    END IF;
    CONTINUE WHEN v_scene.state <> 'ready';
    PERFORM mdame.invalidate_scene_cache(v_scene.scene_hash, v_scene.result ->> 'uri', p_reason)
      WHERE v_scene.result ? 'uri';
    SELECT v_scene.idempotency_key || ':heal:' || (count(*) + 1) INTO v_key
      FROM events WHERE subject_kind = 'scene' AND subject_id = v_scene.id
       AND event = 'transition' AND from_state = 'ready' AND to_state = 'queued';
    PERFORM mdame.enqueue_job(p_job_type, v_key,
                              (v_item -> 'job') || jsonb_build_object('scene_id', v_scene.id),
                              p_max_attempts, 100, 0, p_partition_key);
    PERFORM mdame._transition('scene', v_scene.id, 'ready', 'queued',
                              jsonb_build_object('job_key', v_key, 'healing', left(p_reason, 500)));
    v_queued := v_queued + 1;
  END LOOP;
  IF v_queued > 0 THEN
    PERFORM mdame._transition('script', p_script_id, v_state, 'planned',
                              jsonb_build_object('healing', left(p_reason, 500)));
  END IF;
  RETURN v_queued;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.requeue_scenes(bigint, jsonb, text, text, integer, text, bigint),
  mdame._scene_job_key(mdame.scenes)
TO mdame_app;
