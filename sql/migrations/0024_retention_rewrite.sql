-- 0024: a collected object is named again only after its bytes were stored again.
--
-- 0018's guard dropped a 'collected' record whenever a row started naming the object, trusting
-- that the writer had stored the bytes again. A writer whose put_file found the object still
-- there (it was 'collecting', its bytes about to go) skipped the upload; the collector then
-- deleted the bytes, and the writer's row named nothing. Now the guard refuses (MD010, a kind
-- of MD003) to name an object whose record is 'collected'. The writer reads the record
-- (media_collection_mark), uploads the bytes again whatever the store holds, and calls
-- media_stored_again with the collected_at it read: the record is dropped only if it is still
-- that collection's, so an upload made before a later collection deleted the bytes does not
-- count. Then the row may name it.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- The guard on every row that starts naming stored media, under the object's lock: an object
-- being collected is refused (MD003: retried once the collection is over), and so is one
-- whose collection is over (MD010) until media_stored_again records that its bytes were
-- stored again after the collection.
CREATE OR REPLACE FUNCTION mdame._media_reference_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
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
                                        v_new -> 'payload' ->> 'thumbnail_uri']) AS u
     WHERE u IS NOT NULL
       AND u NOT IN (SELECT o FROM unnest(ARRAY[v_old ->> 'uri', v_old -> 'result' ->> 'uri',
                                                v_old -> 'payload' ->> 'uri',
                                                v_old -> 'payload' ->> 'thumbnail_uri']) AS o
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
$$;

-- The object's collection record: ('collecting', NULL), ('collected', when), or no row.
CREATE FUNCTION mdame.media_collection_mark(p_uri text)
RETURNS TABLE (state text, collected_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
BEGIN
  PERFORM mdame._require_media_uri(p_uri);
  RETURN QUERY SELECT m.state, m.collected_at FROM media_collections m WHERE m.uri = p_uri;
END
$$;

-- The caller stored the object's bytes again after reading its record collected at
-- p_collected_at: that record goes, and rows may name the object. True when rows may name it
-- now (the record was dropped, or another writer dropped it first); false when it was
-- collected again since (the caller's upload may predate that deletion: store it again).
-- MD003 while it is being collected: the collector may still delete what was just stored.
CREATE FUNCTION mdame.media_stored_again(p_uri text, p_collected_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.media_collection_mark(text),
  mdame.media_stored_again(text, timestamptz)
TO mdame_app;
