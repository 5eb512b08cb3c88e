-- Media retention: which stored media nothing needs, and the marks that guard a row's objects.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- The retention policy as the caller passes it:
--   {"render_days": 30, "voice_days": 7, "dimensions": {"<slug>": {"render_days": 60}}}
-- Days are whole numbers from 0 to 3650; a dimension's values override the defaults.
CREATE OR REPLACE FUNCTION mdame._retention_days(p_policy jsonb, p_slug text, p_field text)
 RETURNS integer
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_value jsonb := coalesce(p_policy -> 'dimensions' -> p_slug -> p_field, p_policy -> p_field);
BEGIN
  IF v_value IS NULL OR jsonb_typeof(v_value) <> 'number' OR v_value::numeric <> trunc(v_value::numeric)
     OR v_value::numeric < 0 OR v_value::numeric > 3650 THEN
    PERFORM mdame._invalid(format('policy %s%s must be a whole number of days from 0 to 3650 (got %s)',
                                  CASE WHEN p_policy -> 'dimensions' -> p_slug ? p_field
                                       THEN format('dimensions.%s.', p_slug) ELSE '' END,
                                  p_field, coalesce(v_value::text, 'nothing')));
  END IF;
  RETURN v_value::integer;
END
$function$;
REVOKE ALL ON FUNCTION mdame._retention_days(p_policy jsonb, p_slug text, p_field text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_policy(p_policy jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_slug text;
BEGIN
  PERFORM mdame._require_json('policy', p_policy);
  PERFORM mdame._retention_days(p_policy, '', 'render_days'),
          mdame._retention_days(p_policy, '', 'voice_days');
  IF p_policy ? 'dimensions' THEN
    PERFORM mdame._require_json('policy.dimensions', p_policy -> 'dimensions');
    FOR v_slug IN SELECT jsonb_object_keys(p_policy -> 'dimensions') LOOP
      PERFORM mdame._require_json(format('policy.dimensions.%s', v_slug),
                                  p_policy -> 'dimensions' -> v_slug);
      PERFORM mdame._retention_days(p_policy, v_slug, 'render_days'),
              mdame._retention_days(p_policy, v_slug, 'voice_days');
    END LOOP;
  END IF;
  RETURN p_policy;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_policy(p_policy jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- Every reference a row makes to stored media, and whether it still needs the object (with
-- why, or why not). One row per reference; the policy was checked by the caller.
CREATE OR REPLACE FUNCTION mdame._media_references(p_policy jsonb, p_uri text DEFAULT NULL::text)
 RETURNS TABLE(uri text, kind text, needed boolean, reason text)
 LANGUAGE sql
 STABLE
AS $function$
  WITH finished AS (
    -- When each finished script finished: its last publication, else its last change.
    SELECT sc.id, d.slug, sc.state,
           coalesce((SELECT max(p.updated_at) FROM publications p
                      WHERE p.script_id = sc.id AND p.state = 'published'), sc.updated_at) AS at
      FROM scripts sc JOIN dimensions d ON d.id = sc.dimension_id
     WHERE sc.state IN ('published', 'rejected', 'failed')
  )
  -- Clips named by scenes.
  SELECT s.result ->> 'uri', 'clip',
         f.id IS NULL,
         CASE WHEN f.id IS NULL THEN format('scene %s: script %s is not finished', s.id, s.script_id)
              ELSE format('script %s %s', f.id, f.state) END
    FROM scenes s LEFT JOIN finished f ON f.id = s.script_id
   WHERE s.result ? 'uri' AND (p_uri IS NULL OR s.result ->> 'uri' = p_uri)
  UNION ALL
  -- Clips named by the scene cache: kept for its TTL.
  SELECT c.uri, 'clip', c.expires_at > now(),
         CASE WHEN c.expires_at > now() THEN format('scene cache entry live until %s', c.expires_at)
              ELSE format('scene cache entry expired at %s', c.expires_at) END
    FROM scene_cache c
   WHERE p_uri IS NULL OR c.uri = p_uri
  UNION ALL
  -- Voice tracks: kept voice_days after their script finished.
  SELECT v.payload ->> 'uri', 'voice',
         f.id IS NULL OR f.at > now() - make_interval(days => mdame._retention_days(p_policy, f.slug, 'voice_days')),
         CASE WHEN f.id IS NULL THEN format('voice track %s: script %s is not finished', v.id, v.script_id)
              ELSE format('script %s %s at %s (voice kept %s days)', f.id, f.state, f.at,
                          mdame._retention_days(p_policy, f.slug, 'voice_days')) END
    FROM voice_tracks v LEFT JOIN finished f ON f.id = v.script_id
   WHERE v.payload ? 'uri' AND (p_uri IS NULL OR v.payload ->> 'uri' = p_uri)
  UNION ALL
  -- Renders, their thumbnails and contact sheets: kept render_days after their script
  -- finished, and while any publication of them is still in flight. A contact sheet is
  -- collected as a thumbnail: a still image of the render, as media_collections' kinds go.
  SELECT u.uri, u.kind,
         f.id IS NULL
           OR f.at > now() - make_interval(days => mdame._retention_days(p_policy, f.slug, 'render_days'))
           OR EXISTS (SELECT 1 FROM publications p WHERE p.render_id = r.id
                         AND p.state NOT IN ('published', 'failed')),
         CASE WHEN f.id IS NULL THEN format('render %s: script %s is not finished', r.id, r.script_id)
              ELSE format('script %s %s at %s (renders kept %s days)', f.id, f.state, f.at,
                          mdame._retention_days(p_policy, f.slug, 'render_days')) END
    FROM renders r
    LEFT JOIN finished f ON f.id = r.script_id
    CROSS JOIN LATERAL (VALUES (r.payload ->> 'uri', 'render'),
                               (r.payload ->> 'thumbnail_uri', 'thumbnail'),
                               (r.payload ->> 'contact_sheet_uri', 'thumbnail')) AS u (uri, kind)
   WHERE u.uri IS NOT NULL AND (p_uri IS NULL OR u.uri = p_uri)
$function$;
REVOKE ALL ON FUNCTION mdame._media_references(p_policy jsonb, p_uri text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._media_lock(p_uri text)
 RETURNS void
 LANGUAGE sql
AS $function$
  SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('mdame.media:' || p_uri, 0))
$function$;
REVOKE ALL ON FUNCTION mdame._media_lock(p_uri text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_media_uri(p_uri text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  RETURN mdame._require_match('uri', p_uri, '^media://sha256/[0-9a-f]{64}(\.[A-Za-z0-9]{1,10})?$');
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_media_uri(p_uri text) FROM PUBLIC, mdame_app, mdame_admin;

-- What may be collected now under the policy, with the reason; objects left 'collecting' by a
-- run that stopped midway come first (state 'collecting'), then the rest ('collectable').
-- Read-only: begin_media_collection decides again under the object's lock.
CREATE OR REPLACE FUNCTION mdame.collectable_media(p_policy jsonb, p_limit integer)
 RETURNS TABLE(uri text, kind text, reason text, state text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
  PERFORM mdame._require_policy(p_policy), mdame._require_range('limit', p_limit, 1, 100000);
  RETURN QUERY
  (SELECT m.uri, m.kind, m.reason, m.state FROM media_collections m
    WHERE m.state = 'collecting' ORDER BY m.started_at, m.uri)
  UNION ALL
  (SELECT r.uri, min(r.kind), left(string_agg(DISTINCT r.reason, '; '), 1000), 'collectable'
     FROM mdame._media_references(p_policy) r
    WHERE NOT EXISTS (SELECT 1 FROM media_collections m WHERE m.uri = r.uri)
    GROUP BY r.uri
   HAVING NOT bool_or(r.needed)
    ORDER BY r.uri)
  LIMIT p_limit;
END
$function$;
REVOKE ALL ON FUNCTION mdame.collectable_media(p_policy jsonb, p_limit integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.collectable_media(p_policy jsonb, p_limit integer) TO mdame_app;

-- Marks one object 'collecting' if nothing needs it now (decided under its lock, which the
-- reference trigger takes too, so no row can start naming it unseen). Returns whether the
-- caller may delete its bytes, the kind, and why (or what still needs it). An object already
-- 'collecting' (a run stopped midway) is the caller's to finish.
CREATE OR REPLACE FUNCTION mdame.begin_media_collection(p_uri text, p_policy jsonb, p_holder text)
 RETURNS TABLE(collect boolean, kind text, reason text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_row media_collections;
  v_kind text;
  v_needed boolean;
  v_reason text;
BEGIN
  PERFORM mdame._require_media_uri(p_uri), mdame._require_policy(p_policy),
          mdame._require_text('holder', p_holder, 200);
  PERFORM mdame._media_lock(p_uri);
  SELECT * INTO v_row FROM media_collections m WHERE m.uri = p_uri FOR UPDATE;
  IF FOUND AND v_row.state = 'collecting' THEN
    UPDATE media_collections m SET holder = p_holder WHERE m.uri = p_uri;
    RETURN QUERY SELECT true, v_row.kind, v_row.reason;
    RETURN;
  ELSIF FOUND THEN
    RETURN QUERY SELECT false, v_row.kind, 'already collected'::text;
    RETURN;
  END IF;
  SELECT min(r.kind), bool_or(r.needed),
         coalesce(string_agg(DISTINCT r.reason, '; ') FILTER (WHERE r.needed),
                  string_agg(DISTINCT r.reason, '; '))
    INTO v_kind, v_needed, v_reason
    FROM mdame._media_references(p_policy, p_uri) r;
  IF v_kind IS NULL THEN
    -- No row names it: the database cannot vouch that nothing needs it (a step may have
    -- stored it a moment ago and not yet recorded it), so it is never collected from here.
    RETURN QUERY SELECT false, NULL::text, 'no row names it'::text;
    RETURN;
  END IF;
  IF v_needed THEN
    RETURN QUERY SELECT false, v_kind, v_reason;
    RETURN;
  END IF;
  INSERT INTO media_collections (uri, kind, state, reason, holder)
  VALUES (p_uri, v_kind, 'collecting', left(v_reason, 1000), p_holder);
  RETURN QUERY SELECT true, v_kind, v_reason;
END
$function$;
REVOKE ALL ON FUNCTION mdame.begin_media_collection(p_uri text, p_policy jsonb, p_holder text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.begin_media_collection(p_uri text, p_policy jsonb, p_holder text) TO mdame_app;

-- The object's bytes are gone: it becomes 'collected' and the (expired) cache entries naming it
-- are dropped, together. True when it changed now, false when it was already collected.
CREATE OR REPLACE FUNCTION mdame.finish_media_collection(p_uri text, p_bytes bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_row media_collections;
BEGIN
  PERFORM mdame._require_media_uri(p_uri), mdame._require_range('bytes', p_bytes, 0, 1::bigint << 50);
  -- Cache rows first, before the collection row: a clip step writing the cache takes the
  -- cache row's lock and then the object's (the trigger), never the other way round.
  DELETE FROM scene_cache c WHERE c.uri = p_uri
     AND EXISTS (SELECT 1 FROM media_collections m WHERE m.uri = p_uri AND m.state = 'collecting');
  SELECT * INTO v_row FROM media_collections m WHERE m.uri = p_uri FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: %s is not being collected (begin_media_collection first)', p_uri);
  ELSIF v_row.state = 'collected' THEN
    RETURN false;
  END IF;
  UPDATE media_collections m SET state = 'collected', collected_at = now() WHERE m.uri = p_uri;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('media', 0, 'collected',
          jsonb_build_object('uri', p_uri, 'kind', v_row.kind, 'bytes', p_bytes,
                             'reason', left(v_row.reason, 500)));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.finish_media_collection(p_uri text, p_bytes bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.finish_media_collection(p_uri text, p_bytes bigint) TO mdame_app;

-- The bytes could not be deleted and are still there: the mark goes, the object lives on.
-- True when a mark was removed.
CREATE OR REPLACE FUNCTION mdame.abandon_media_collection(p_uri text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_media_uri(p_uri);
  PERFORM mdame._media_lock(p_uri);
  DELETE FROM media_collections m WHERE m.uri = p_uri AND m.state = 'collecting';
  RETURN FOUND;
END
$function$;
REVOKE ALL ON FUNCTION mdame.abandon_media_collection(p_uri text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.abandon_media_collection(p_uri text) TO mdame_app;

-- The guard on every row that starts naming stored media, under the object's lock: an object
-- being collected is refused (MD003: retried once the collection is over), and so is one
-- whose collection is over (MD010) until media_stored_again records that its bytes were
-- stored again after the collection.
CREATE OR REPLACE FUNCTION mdame._media_reference_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_new jsonb := to_jsonb(NEW);
  -- A cache entry is checked on every write: refreshing an expired entry keeps its URI.
  v_old jsonb := CASE WHEN TG_OP = 'UPDATE' AND TG_TABLE_NAME <> 'scene_cache' THEN to_jsonb(OLD)
                      ELSE '{}'::jsonb END;
  v_uri text;
  v_mark mdame.media_collections;
BEGIN
  FOR v_uri IN
    SELECT DISTINCT u FROM unnest(ARRAY[v_new ->> 'uri', v_new -> 'result' ->> 'uri',
                                        v_new -> 'payload' ->> 'uri',
                                        v_new -> 'payload' ->> 'thumbnail_uri',
                                        v_new -> 'payload' ->> 'contact_sheet_uri']) AS u
     WHERE u IS NOT NULL
       AND u NOT IN (SELECT o FROM unnest(ARRAY[v_old ->> 'uri', v_old -> 'result' ->> 'uri',
                                                v_old -> 'payload' ->> 'uri',
                                                v_old -> 'payload' ->> 'thumbnail_uri',
                                                v_old -> 'payload' ->> 'contact_sheet_uri']) AS o
                      WHERE o IS NOT NULL)
  LOOP
    PERFORM mdame._media_lock(v_uri);
    SELECT * INTO v_mark FROM mdame.media_collections m WHERE m.uri = v_uri;
    IF v_mark.state = 'collecting' THEN
      RAISE EXCEPTION USING ERRCODE = 'MD003',
        MESSAGE = format('mdame: %s is being collected by housekeeping; retry once it is done', v_uri);
    ELSIF v_mark.state = 'collected' THEN
      RAISE EXCEPTION USING ERRCODE = 'MD010',
        MESSAGE = format('mdame: %s was collected by housekeeping at %s: store its bytes again '
                         '(put_file with the state as registry) before naming it',
                         v_uri, v_mark.collected_at);
    END IF;
  END LOOP;
  RETURN NEW;
END
$function$;
REVOKE ALL ON FUNCTION mdame._media_reference_guard() FROM PUBLIC, mdame_app, mdame_admin;
CREATE OR REPLACE TRIGGER media_reference_guard BEFORE INSERT OR UPDATE OF payload ON mdame.renders FOR EACH ROW EXECUTE FUNCTION mdame._media_reference_guard();
CREATE OR REPLACE TRIGGER media_reference_guard BEFORE INSERT OR UPDATE ON mdame.scene_cache FOR EACH ROW EXECUTE FUNCTION mdame._media_reference_guard();
CREATE OR REPLACE TRIGGER media_reference_guard BEFORE INSERT OR UPDATE OF result ON mdame.scenes FOR EACH ROW EXECUTE FUNCTION mdame._media_reference_guard();
CREATE OR REPLACE TRIGGER media_reference_guard BEFORE INSERT OR UPDATE OF payload ON mdame.voice_tracks FOR EACH ROW EXECUTE FUNCTION mdame._media_reference_guard();

-- The object's collection record: ('collecting', NULL), ('collected', when), or no row.
CREATE OR REPLACE FUNCTION mdame.media_collection_mark(p_uri text)
 RETURNS TABLE(state text, collected_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
  PERFORM mdame._require_media_uri(p_uri);
  RETURN QUERY SELECT m.state, m.collected_at FROM media_collections m WHERE m.uri = p_uri;
END
$function$;
REVOKE ALL ON FUNCTION mdame.media_collection_mark(p_uri text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.media_collection_mark(p_uri text) TO mdame_app;

-- The caller stored the object's bytes again after reading its record collected at
-- p_collected_at: that record goes, and rows may name the object. True when rows may name it
-- now (the record was dropped, or another writer dropped it first); false when it was
-- collected again since (the caller's upload may predate that deletion: store it again).
-- MD003 while it is being collected: the collector may still delete what was just stored.
CREATE OR REPLACE FUNCTION mdame.media_stored_again(p_uri text, p_collected_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_mark media_collections;
BEGIN
  PERFORM mdame._require_media_uri(p_uri);
  IF p_collected_at IS NULL OR NOT isfinite(p_collected_at) THEN
    PERFORM mdame._invalid('collected_at must be a finite time (media_collection_mark gives it)');
  END IF;
  PERFORM mdame._media_lock(p_uri);
  SELECT * INTO v_mark FROM media_collections m WHERE m.uri = p_uri FOR UPDATE;
  IF NOT FOUND THEN
    RETURN true;
  ELSIF v_mark.state = 'collecting' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: %s is being collected by housekeeping; store it again once it is done',
                       p_uri);
  ELSIF v_mark.collected_at <> p_collected_at THEN
    RETURN false;
  END IF;
  DELETE FROM media_collections m WHERE m.uri = p_uri;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('media', 0, 'stored_again',
          jsonb_build_object('uri', p_uri, 'kind', v_mark.kind, 'collected_at', v_mark.collected_at));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.media_stored_again(p_uri text, p_collected_at timestamp with time zone) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.media_stored_again(p_uri text, p_collected_at timestamp with time zone) TO mdame_app;
