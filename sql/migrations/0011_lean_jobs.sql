-- 0011: a leaner jobs table for the queue's hot path.
--
-- A job changes state twice (claimed, completed), and a state change can never be a HOT update
-- (the partial indexes' predicates read state), so every index on jobs gets a new entry on each
-- of them. The UNIQUE index on idempotency_key was one of those, yet it only ever answers at
-- enqueue time. Its uniqueness moves to job_keys, written once per job and never updated;
-- jobs.idempotency_key stays as a plain column for reads. Measured with one worker, the floor's
-- two statements on mdame.jobs now run about as fast as on the floor's own table; the rest of
-- the gap to the floor is the RPCs' plpgsql and the client's pool (see bench/README.md).

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- No foreign key to jobs on purpose: its trigger would fire on every update of a job. Rows of
-- both tables are only created together, by enqueue_job.
CREATE TABLE job_keys (
  idempotency_key text PRIMARY KEY CHECK (length(idempotency_key) BETWEEN 1 AND 512),
  job_id          bigint NOT NULL
);
INSERT INTO job_keys (idempotency_key, job_id) SELECT idempotency_key, id FROM jobs;
ALTER TABLE jobs DROP CONSTRAINT jobs_idempotency_key_key;

ALTER TABLE job_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON job_keys FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON job_keys TO mdame_app;

-- Same contract as 0004's enqueue_job. The key is taken first (ON CONFLICT waits for a
-- concurrent enqueue of the same key to commit), then the job row is written with the id the
-- key already names.
CREATE OR REPLACE FUNCTION mdame.enqueue_job(p_job_type text, p_idempotency_key text,
                            p_payload jsonb, p_max_attempts integer DEFAULT 3,
                            p_priority integer DEFAULT 100, p_delay_seconds integer DEFAULT 0,
                            p_partition_key text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
  v_job jobs;
BEGIN
  PERFORM mdame._require_match('job_type', p_job_type, '^[a-z][a-z0-9_.-]{0,62}$'),
          mdame._require_text('idempotency_key', p_idempotency_key),
          mdame._require_json('payload', p_payload),
          mdame._require_range('max_attempts', p_max_attempts, 1, 100),
          mdame._require_range('priority', p_priority, -1000000, 1000000),
          mdame._require_range('delay_seconds', p_delay_seconds, 0, 31622400);
  IF p_partition_key IS NOT NULL THEN
    PERFORM mdame._require_text('partition_key', p_partition_key, 200);
  END IF;
  INSERT INTO job_keys (idempotency_key, job_id)
  VALUES (p_idempotency_key, nextval(pg_get_serial_sequence('mdame.jobs', 'id')))
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING job_id INTO v_id;
  IF v_id IS NOT NULL THEN
    INSERT INTO jobs (id, job_type, idempotency_key, payload, max_attempts, priority, run_after,
                      partition_key)
    VALUES (v_id, p_job_type, p_idempotency_key, p_payload, p_max_attempts, p_priority,
            now() + p_delay_seconds * interval '1 second', p_partition_key);
    RETURN v_id;
  END IF;
  SELECT j.* INTO v_job FROM job_keys k JOIN jobs j ON j.id = k.job_id
   WHERE k.idempotency_key = p_idempotency_key;
  IF (v_job.job_type, v_job.payload, v_job.partition_key)
     IS DISTINCT FROM (p_job_type, p_payload, p_partition_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD002',
      MESSAGE = format('mdame: job %L already exists (id %s) with a different type or payload, '
                       'or for another partition', p_idempotency_key, v_job.id);
  END IF;
  RETURN v_job.id;
END
$$;

-- Same as 0006's finish_visuals, finding each scene's job through job_keys.
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
    FROM scenes s
    LEFT JOIN job_keys k ON k.idempotency_key = mdame._scene_job_key(s)
    LEFT JOIN jobs j ON j.id = k.job_id
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

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.enqueue_job(text, text, jsonb, integer, integer, integer, text),
  mdame.finish_visuals(bigint, bigint)
TO mdame_app;
