-- 0016: analytics (what viewers did) and the Strategic Auditor's weekly reports (issue 12).
--
-- video_stats: one row per publication and observed day (the day the statistics were read, in
-- the analytics partition's calendar). Counters are the channel's totals at fetch time; a
-- re-read of the same day replaces the row (the later read is the fresher one), so a retried or
-- re-materialized analytics partition writes the same rows, never duplicates.
--
-- reports: one row per dimension and week (week_start: the Monday of a week that ends on
-- Sunday). A re-run of the Auditor replaces the row and counts a revision; images are
-- references into the media store (URI and SHA-256), never bytes.
--
-- Neither RPC is fenced: both write derived observations, not a partition's work, and run
-- outside the dimension's pipeline lock so a long content run never delays them (and they never
-- delay it). Both are idempotent last-writer-wins, computed from the database itself.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- =============================================================================================
-- GPU seconds: when a job's current attempt started, so the report can sum the time generated
-- clips held a worker (jobs knew only when they were enqueued and finished). Set by a trigger on
-- every claim, whichever RPC claims: no claim path can forget it.
-- =============================================================================================
ALTER TABLE jobs ADD COLUMN started_at timestamptz;

CREATE FUNCTION mdame._job_started() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.started_at := now();
  RETURN NEW;
END
$$;

CREATE TRIGGER jobs_started_at BEFORE UPDATE OF state ON jobs
  FOR EACH ROW WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running')
  EXECUTE FUNCTION mdame._job_started();

-- =============================================================================================
-- Analytics.
-- =============================================================================================
CREATE TABLE video_stats (
  publication_id bigint NOT NULL REFERENCES publications (id),
  day            date NOT NULL,
  -- Denormalised from the publication's script, so the weekly report reads one index.
  dimension_id   bigint NOT NULL REFERENCES dimensions (id),
  video_id       text NOT NULL CHECK (length(video_id) BETWEEN 1 AND 200),
  views          bigint NOT NULL CHECK (views >= 0),
  likes          bigint NOT NULL CHECK (likes >= 0),
  comments       bigint NOT NULL CHECK (comments >= 0),
  fetched_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (publication_id, day)
);
CREATE INDEX video_stats_dimension_day_idx ON video_stats (dimension_id, day);
ALTER TABLE video_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON video_stats FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON video_stats TO mdame_app;

-- Upserts a batch of one day's statistics: p_items is
-- [{"publication_id": n, "views": n, "likes": n, "comments": n}, ...] (at most 1000 items),
-- each of a published publication. All or nothing; returns the number of rows written.
CREATE FUNCTION mdame.record_video_stats(p_day date, p_items jsonb)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_item jsonb;
  v_key text;
  v_pub publications;
  v_dimension bigint;
  v_count integer := 0;
BEGIN
  PERFORM mdame._require_not_null('day', p_day),
          mdame._require_json('items', p_items, 'array');
  IF p_day > current_date + 1 OR p_day < date '2000-01-01' THEN
    PERFORM mdame._invalid(format('day %s is not a plausible observation day', p_day));
  END IF;
  IF jsonb_array_length(p_items) > 1000 THEN
    PERFORM mdame._invalid(format('items holds %s entries, over the limit of 1000',
                                  jsonb_array_length(p_items)));
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF jsonb_typeof(v_item) <> 'object' THEN
      PERFORM mdame._invalid(format('items[%s] must be a JSON object (got %s)', v_count,
                                    jsonb_typeof(v_item)));
    END IF;
    FOREACH v_key IN ARRAY ARRAY['publication_id', 'views', 'likes', 'comments'] LOOP
      IF jsonb_typeof(v_item -> v_key) IS DISTINCT FROM 'number'
         OR (v_item ->> v_key) !~ '^[0-9]{1,15}$' THEN
        PERFORM mdame._invalid(format('items[%s].%s must be a non-negative integer (got %s)',
                                      v_count, v_key, mdame._clip(v_item ->> v_key)));
      END IF;
    END LOOP;
    SELECT * INTO v_pub FROM publications WHERE id = (v_item ->> 'publication_id')::bigint;
    IF v_pub.id IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006',
        MESSAGE = format('mdame: publication %s does not exist', v_item ->> 'publication_id');
    ELSIF v_pub.state <> 'published' OR coalesce(v_pub.result ->> 'video_id', '') = '' THEN
      RAISE EXCEPTION USING ERRCODE = 'MD003',
        MESSAGE = format('mdame: publication %s is %s, not published with a video id',
                         v_pub.id, v_pub.state);
    END IF;
    SELECT s.dimension_id INTO v_dimension FROM scripts s WHERE s.id = v_pub.script_id;
    INSERT INTO video_stats (publication_id, day, dimension_id, video_id, views, likes, comments)
    VALUES (v_pub.id, p_day, v_dimension, v_pub.result ->> 'video_id',
            (v_item ->> 'views')::bigint, (v_item ->> 'likes')::bigint,
            (v_item ->> 'comments')::bigint)
    ON CONFLICT (publication_id, day) DO UPDATE
      SET views = EXCLUDED.views, likes = EXCLUDED.likes, comments = EXCLUDED.comments,
          fetched_at = now();
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- =============================================================================================
-- The Strategic Auditor's weekly reports.
-- =============================================================================================
CREATE TABLE reports (
  id           bigserial PRIMARY KEY,
  dimension_id bigint NOT NULL REFERENCES dimensions (id),
  week_start   date NOT NULL CHECK (extract(isodow FROM week_start) = 1),
  metrics      jsonb NOT NULL CHECK (jsonb_typeof(metrics) = 'object'),
  markdown     text NOT NULL CHECK (length(markdown) BETWEEN 1 AND 200000),
  -- [{"name": "views.png", "uri": "media://...", "sha256": "..."}]
  images       jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(images) = 'array'),
  revision     integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (dimension_id, week_start)
);
ALTER TABLE reports ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON reports FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON reports TO mdame_app;

-- Stores the dimension's report of the week that starts on p_week_start (a Monday), replacing
-- an earlier run's. Returns the report id (stable across re-runs).
CREATE FUNCTION mdame.store_report(p_dimension_slug text, p_week_start date, p_metrics jsonb,
                                   p_markdown text, p_images jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_dimension bigint;
  v_image jsonb;
  v_index integer := 0;
  v_id bigint;
  v_revision integer;
BEGIN
  PERFORM mdame._require_not_null('week_start', p_week_start),
          mdame._require_json('metrics', p_metrics, 'object'),
          mdame._require_text('markdown', p_markdown, 200000),
          mdame._require_json('images', p_images, 'array');
  IF extract(isodow FROM p_week_start) <> 1 THEN
    PERFORM mdame._invalid(format('week_start %s is a %s, not a Monday', p_week_start,
                                  trim(to_char(p_week_start, 'Day'))));
  END IF;
  IF jsonb_array_length(p_images) > 20 THEN
    PERFORM mdame._invalid(format('images holds %s entries, over the limit of 20',
                                  jsonb_array_length(p_images)));
  END IF;
  FOR v_image IN SELECT value FROM jsonb_array_elements(p_images) LOOP
    IF jsonb_typeof(v_image) <> 'object' THEN
      PERFORM mdame._invalid(format('images[%s] must be a JSON object', v_index));
    END IF;
    PERFORM mdame._require_match(format('images[%s].name', v_index), v_image ->> 'name',
                                 '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'),
            mdame._require_text(format('images[%s].uri', v_index), v_image ->> 'uri', 2000),
            mdame._require_sha256(format('images[%s].sha256', v_index), v_image ->> 'sha256');
    v_index := v_index + 1;
  END LOOP;
  v_dimension := mdame._dimension_id(p_dimension_slug);
  INSERT INTO reports (dimension_id, week_start, metrics, markdown, images)
  VALUES (v_dimension, p_week_start, p_metrics, p_markdown, p_images)
  ON CONFLICT (dimension_id, week_start) DO UPDATE
    SET metrics = EXCLUDED.metrics, markdown = EXCLUDED.markdown, images = EXCLUDED.images,
        revision = reports.revision + 1, updated_at = now()
  RETURNING id, revision INTO v_id, v_revision;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('report', v_id, 'report_stored',
          jsonb_build_object('dimension', p_dimension_slug, 'week_start', p_week_start,
                             'revision', v_revision));
  RETURN v_id;
END
$$;
