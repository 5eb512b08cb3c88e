-- Analytics and weekly reports: the channels' daily counters and the Strategic Auditor's reports.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Upserts a batch of one day's statistics: p_items is
-- [{"publication_id": n, "views": n, "likes": n, "comments": n}, ...] (at most 1000 items),
-- each of a published publication of the dimension whose pipeline lock p_lock_token holds (the
-- analytics step reads the counters under it). All or nothing; returns the number of rows
-- written.
CREATE OR REPLACE FUNCTION mdame.record_video_stats(p_day date, p_items jsonb, p_lock_token bigint)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_item jsonb;
  v_key text;
  v_pub publications;
  v_dimension bigint;
  v_fenced bigint;
  v_count integer := 0;
BEGIN
  PERFORM mdame._fence_token(p_lock_token);  -- a stale token is refused before anything else
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
    END IF;
    SELECT s.dimension_id INTO v_dimension FROM scripts s WHERE s.id = v_pub.script_id;
    IF v_dimension IS DISTINCT FROM v_fenced THEN  -- a token holds one dimension's lock
      PERFORM mdame._fence(v_dimension, p_lock_token);
      v_fenced := v_dimension;
    END IF;
    IF v_pub.state <> 'published' OR coalesce(v_pub.result ->> 'video_id', '') = '' THEN
      RAISE EXCEPTION USING ERRCODE = 'MD003',
        MESSAGE = format('mdame: publication %s is %s, not published with a video id',
                         v_pub.id, v_pub.state);
    END IF;
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
$function$;
REVOKE ALL ON FUNCTION mdame.record_video_stats(p_day date, p_items jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_video_stats(p_day date, p_items jsonb, p_lock_token bigint) TO mdame_app;

-- Stores the dimension's report of the week that starts on p_week_start (a Monday), replacing
-- an earlier run's, under the dimension's pipeline lock (the Auditor's and the Adaptive
-- Engine's steps hold it). Returns the report id (stable across re-runs).
CREATE OR REPLACE FUNCTION mdame.store_report(p_dimension_slug text, p_week_start date, p_metrics jsonb, p_markdown text, p_images jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dimension bigint;
  v_image jsonb;
  v_index integer := 0;
  v_id bigint;
  v_revision integer;
BEGIN
  v_dimension := mdame._dimension_id(p_dimension_slug);
  PERFORM mdame._fence(v_dimension, p_lock_token);
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
$function$;
REVOKE ALL ON FUNCTION mdame.store_report(p_dimension_slug text, p_week_start date, p_metrics jsonb, p_markdown text, p_images jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.store_report(p_dimension_slug text, p_week_start date, p_metrics jsonb, p_markdown text, p_images jsonb, p_lock_token bigint) TO mdame_app;

-- The raw facts of one dimension's week (partition days p_first_day..p_last_day) that the
-- Strategic Auditor's metrics are computed from (mdame_domain.audit), as one JSON object. Work is
-- attributed to its partition day; spend and quota to the day they were used; the daily
-- counters start a week before, so the report can draw the trend across weeks.
CREATE OR REPLACE FUNCTION mdame.auditor_facts(p_dimension_id bigint, p_first_day date,
                                               p_last_day date)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = mdame, pg_temp
AS $$
BEGIN
  PERFORM mdame._require_not_null('dimension_id', p_dimension_id),
          mdame._require_not_null('first_day', p_first_day),
          mdame._require_not_null('last_day', p_last_day);
  IF p_last_day < p_first_day OR p_last_day - p_first_day > 366 THEN
    PERFORM mdame._invalid(format('last_day %s must be on or after first_day %s and within a '
                                  'year of it', p_last_day, p_first_day));
  END IF;
  RETURN (
  WITH week_scripts AS (
    SELECT id, state, payload FROM scripts
     WHERE dimension_id = p_dimension_id AND partition_date BETWEEN p_first_day AND p_last_day
  )
  SELECT jsonb_build_object(
    'scripts', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
               'id', id, 'state', state,
               'hook_score', (payload -> 'script' ->> 'hook_score')::float8) ORDER BY id)
        FROM week_scripts), '[]'),
    'transitions', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
               'script_id', e.subject_id, 'from', e.from_state, 'to', e.to_state,
               'at', e.created_at) ORDER BY e.id)
        FROM events e
       WHERE e.subject_kind = 'script' AND e.to_state IS NOT NULL
         AND e.subject_id IN (SELECT id FROM week_scripts)), '[]'),
    'topics', coalesce((
      SELECT jsonb_agg(jsonb_build_object('state', state,
                                          'rejected_by', result ->> 'rejected_by'))
        FROM topics
       WHERE dimension_id = p_dimension_id
         AND partition_date BETWEEN p_first_day AND p_last_day), '[]'),
    'trends', (SELECT count(*) FROM trends
                WHERE dimension_id = p_dimension_id
                  AND partition_date BETWEEN p_first_day AND p_last_day),
    'safety', coalesce((
      SELECT jsonb_agg(jsonb_build_object('verdict', verdict, 'rule', rule,
                                          'subject_kind', subject_kind))
        FROM safety_audit_logs
       WHERE dimension_id = p_dimension_id AND verdict <> 'allow'
         AND created_at >= p_first_day AND created_at < p_last_day + 1), '[]'),
    'spent_micros', (
      SELECT coalesce(sum(CASE l.state WHEN 'settled' THEN l.actual_micros
                                       WHEN 'reserved' THEN l.reserved_micros END), 0)
        FROM budget_ledger l JOIN dimensions d ON l.scope = 'dimension:' || d.slug
       WHERE d.id = p_dimension_id
         AND l.period BETWEEN p_first_day::text AND p_last_day::text),
    'quota', coalesce((
      SELECT jsonb_object_agg(bucket, units)
        FROM (SELECT l.bucket, sum(l.units) AS units
                FROM quota_ledger l JOIN dimension_accounts a ON a.id = l.account_id
               WHERE a.dimension_id = p_dimension_id AND l.state = 'committed'
                 AND l.day BETWEEN p_first_day AND p_last_day
               GROUP BY l.bucket) q), '{}'),
    'scenes', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
               'state', state, 'cached', coalesce((result ->> 'cached')::boolean, false)))
        FROM scenes WHERE script_id IN (SELECT id FROM week_scripts)), '[]'),
    'gpu_seconds', (
      SELECT coalesce(sum(extract(epoch FROM j.finished_at - j.started_at)), 0)
        FROM jobs j JOIN scenes s ON s.id = (j.payload ->> 'scene_id')::bigint
       WHERE s.script_id IN (SELECT id FROM week_scripts) AND j.state = 'succeeded'
         AND j.started_at IS NOT NULL
         AND NOT coalesce((j.result ->> 'cache_hit')::boolean, false)),
    'videos', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
               'publication_id', p.id, 'published_on', t.partition_date,
               'keywords', coalesce(t.payload -> 'keywords', '[]'),
               'views', last.views, 'likes', last.likes,
               -- The render's contact sheet (a frame of every scene), for the report.
               'contact_sheet', CASE WHEN r.payload ? 'contact_sheet_uri' THEN
                   jsonb_build_object('uri', r.payload ->> 'contact_sheet_uri',
                                      'sha256', r.payload ->> 'contact_sheet_sha256') END)
               ORDER BY p.id)
        FROM publications p
        JOIN scripts s ON s.id = p.script_id
        JOIN topics t ON t.id = s.topic_id
        LEFT JOIN renders r ON r.id = p.render_id
        LEFT JOIN LATERAL (
             SELECT v.views, v.likes FROM video_stats v
              WHERE v.publication_id = p.id AND v.day <= p_last_day
              ORDER BY v.day DESC LIMIT 1) last ON true
       WHERE s.dimension_id = p_dimension_id AND p.state = 'published'
         AND s.partition_date <= p_last_day), '[]'),
    'daily', coalesce((
      SELECT jsonb_agg(jsonb_build_object('day', day, 'publication_id', publication_id,
                                          'views', views, 'likes', likes)
                       ORDER BY day, publication_id)
        FROM video_stats
       WHERE dimension_id = p_dimension_id AND day BETWEEN p_first_day - 7 AND p_last_day),
      '[]')
  ));
END
$$;
REVOKE ALL ON FUNCTION mdame.auditor_facts(p_dimension_id bigint, p_first_day date, p_last_day date) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.auditor_facts(p_dimension_id bigint, p_first_day date, p_last_day date) TO mdame_app, mdame_admin;
