-- The trend sources' conditional-GET cache, shared by dimensions.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Defence in depth: a `key=` query value never reaches a stored error text.
CREATE OR REPLACE FUNCTION mdame._redact_keys(p_text text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  SELECT regexp_replace(p_text, '([?&;]key=)[^&#[:space:]''"<>]*', '\1[redacted]', 'gi')
$function$;
REVOKE ALL ON FUNCTION mdame._redact_keys(p_text text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._require_source_url(p_source_url text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  PERFORM mdame._require_text('source_url', p_source_url, 2000);
  IF p_source_url ~* '[?&;]key=' THEN
    PERFORM mdame._invalid('source_url must not carry a key= parameter (a secret)');
  END IF;
  RETURN p_source_url;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_source_url(p_source_url text) FROM PUBLIC, mdame_app, mdame_admin;

-- The cached validators and items of a source; no row when it was never fetched.
CREATE OR REPLACE FUNCTION mdame.get_feed_cache(p_source_url text)
 RETURNS TABLE(etag text, last_modified text, items jsonb, fetched_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_source_url(p_source_url);
  RETURN QUERY SELECT c.etag, c.last_modified, c.items, c.fetched_at
                 FROM feed_cache c
                WHERE c.source_url = p_source_url AND c.fetched_at IS NOT NULL;
END
$function$;
REVOKE ALL ON FUNCTION mdame.get_feed_cache(p_source_url text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.get_feed_cache(p_source_url text) TO mdame_app;

-- A cached source's items as the trends stage writes them (item_to_json of capped items):
-- at most a source's first 100, each {"source", "title", "guid": non-empty text, "url",
-- "summary": text, "published_at": text or null} within the item caps (mdame_domain/trends/
-- sizes.py, in the bytes of the JSON text). MD001 names the first item that is not.
CREATE OR REPLACE FUNCTION mdame._require_feed_items(p_items jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  v_bad bigint;
BEGIN
  PERFORM mdame._require_json('items', p_items, 'array');
  IF jsonb_array_length(p_items) > 100 THEN
    PERFORM mdame._invalid(format('items holds %s entries, over the limit of 100 a source',
                                  jsonb_array_length(p_items)));
  END IF;
  SELECT t.n - 1 INTO v_bad
    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS t(e, n)
   WHERE NOT (jsonb_typeof(t.e) = 'object'
              AND jsonb_typeof(t.e -> 'source') IS NOT DISTINCT FROM 'string'
              AND jsonb_typeof(t.e -> 'title') IS NOT DISTINCT FROM 'string'
              AND jsonb_typeof(t.e -> 'guid') IS NOT DISTINCT FROM 'string'
              AND coalesce(jsonb_typeof(t.e -> 'url'), 'string') = 'string'
              AND coalesce(jsonb_typeof(t.e -> 'summary'), 'string') = 'string'
              AND coalesce(jsonb_typeof(t.e -> 'published_at'), 'null') IN ('string', 'null'))
      OR t.e ->> 'source' = '' OR btrim(t.e ->> 'title') = '' OR t.e ->> 'guid' = ''
      OR octet_length((t.e -> 'source')::text) > 2002
      OR octet_length((t.e -> 'title')::text) > 602
      OR octet_length((t.e -> 'guid')::text) > 514
      OR coalesce(octet_length((t.e -> 'url')::text), 0) > 2050
      OR coalesce(octet_length((t.e -> 'summary')::text), 0) > 2002
      OR coalesce(octet_length(t.e ->> 'published_at'), 0) > 64
   ORDER BY t.n LIMIT 1;
  IF v_bad IS NOT NULL THEN
    PERFORM mdame._invalid(format(
      'items[%s] must be {"source", "title", "guid": non-empty text; "url", "summary": text; '
      '"published_at": text or null} within the item caps (title 600, summary 2000, url 2048, '
      'guid 512 bytes)', v_bad));
  END IF;
  RETURN p_items;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_feed_items(p_items jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- A full response (p_items given): its validators and items replace the cached ones. A 304
-- (p_items NULL): the cached items stay; validators the 304 carried refresh the stored ones.
-- Either way the source's failure streak ends. Returns the row id. The row is shared by every
-- dimension that lists the source; the writer is the trends stage of one of them, fenced by
-- that dimension's pipeline lock.
CREATE OR REPLACE FUNCTION mdame.record_feed_fetch(p_source_url text, p_etag text, p_last_modified text, p_items jsonb, p_dimension_slug text, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._fence(mdame._dimension_id(p_dimension_slug), p_lock_token);
  PERFORM mdame._require_source_url(p_source_url);
  IF length(p_etag) > 1000 OR length(p_last_modified) > 200 THEN
    PERFORM mdame._invalid('etag or last_modified is too long');
  END IF;
  IF p_items IS NOT NULL THEN
    PERFORM mdame._require_feed_items(p_items);
    INSERT INTO feed_cache AS c (source_url, etag, last_modified, items, fetched_at)
    VALUES (p_source_url, nullif(p_etag, ''), nullif(p_last_modified, ''), p_items, now())
    ON CONFLICT (source_url) DO UPDATE
      SET etag = excluded.etag, last_modified = excluded.last_modified, items = excluded.items,
          fetched_at = now(), failures = 0, updated_at = now()
    RETURNING c.id INTO v_id;
  ELSE
    UPDATE feed_cache c
       SET etag = coalesce(nullif(p_etag, ''), c.etag),
           last_modified = coalesce(nullif(p_last_modified, ''), c.last_modified),
           not_modified_at = now(), failures = 0, updated_at = now()
     WHERE c.source_url = p_source_url AND c.fetched_at IS NOT NULL
    RETURNING c.id INTO v_id;
    IF v_id IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006',
        MESSAGE = format('mdame: no cached response of %s to reuse', left(p_source_url, 200));
    END IF;
  END IF;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_feed_fetch(p_source_url text, p_etag text, p_last_modified text, p_items jsonb, p_dimension_slug text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_feed_fetch(p_source_url text, p_etag text, p_last_modified text, p_items jsonb, p_dimension_slug text, p_lock_token bigint) TO mdame_app;

-- A failed fetch: counted on the source's row (created if needed, with no cached response)
-- and recorded as an event (subject 'feed_source', the row id) naming source and reason.
CREATE OR REPLACE FUNCTION mdame.record_feed_failure(p_source_url text, p_reason text, p_execution_id text DEFAULT NULL::text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
  v_failures integer;
  v_reason text := left(mdame._redact_keys(mdame._require_text('reason', p_reason, 100000)), 2000);
BEGIN
  PERFORM mdame._require_source_url(p_source_url);
  INSERT INTO feed_cache AS c (source_url, failures, last_error, last_error_at)
  VALUES (p_source_url, 1, v_reason, now())
  ON CONFLICT (source_url) DO UPDATE
    SET failures = c.failures + 1, last_error = v_reason, last_error_at = now(),
        updated_at = now()
  RETURNING c.id, c.failures INTO v_id, v_failures;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('feed_source', v_id, 'fetch_failed',
          jsonb_build_object('source', p_source_url, 'reason', v_reason,
                             'consecutive_failures', v_failures,
                             'execution_id', left(p_execution_id, 200)));
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_feed_failure(p_source_url text, p_reason text, p_execution_id text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_feed_failure(p_source_url text, p_reason text, p_execution_id text) TO mdame_app;
