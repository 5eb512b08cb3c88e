-- 0010: the conditional-GET cache of live trend sources (issue 8, slice "feeds").
--
-- One row per source, keyed by its request URL without secrets (a YouTube API key is never
-- part of it: a CHECK refuses any `key=` parameter). It keeps the validators of the last full
-- response (ETag, Last-Modified) and that response's items, so a 304 reuses them; and the
-- source's last failure, with an event per failure for alerting.
--
-- Not fenced: a source (say Google Trends US) is shared by every dimension and day that lists
-- it, so no dimension's pipeline lock owns the row. Every write is self-consistent (validators
-- and items of one response, in one statement); a late writer can at worst store an older
-- response, whose validators then no longer match and cost one full fetch. The client still
-- refuses to write once its own fence is known lost (StateStore.call checks it).

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE TABLE mdame.feed_cache (
  id             bigserial PRIMARY KEY,
  source_url     text NOT NULL UNIQUE
                 CHECK (length(source_url) BETWEEN 1 AND 2000 AND source_url !~* '[?&;]key='),
  etag           text CHECK (length(etag) <= 1000),
  last_modified  text CHECK (length(last_modified) <= 200),
  items          jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(items) = 'array'),
  fetched_at     timestamptz,
  not_modified_at timestamptz,
  failures       integer NOT NULL DEFAULT 0 CHECK (failures >= 0),  -- consecutive
  last_error     text CHECK (length(last_error) <= 2000),
  last_error_at  timestamptz,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON mdame.feed_cache TO mdame_app;
ALTER TABLE mdame.feed_cache ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON mdame.feed_cache FOR SELECT TO mdame_app USING (true);

-- Defence in depth: a `key=` query value never reaches a stored error text.
CREATE FUNCTION mdame._redact_keys(p_text text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT regexp_replace(p_text, '([?&;]key=)[^&#[:space:]''"<>]*', '\1[redacted]', 'gi')
$$;

CREATE FUNCTION mdame._require_source_url(p_source_url text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM mdame._require_text('source_url', p_source_url, 2000);
  IF p_source_url ~* '[?&;]key=' THEN
    PERFORM mdame._invalid('source_url must not carry a key= parameter (a secret)');
  END IF;
  RETURN p_source_url;
END
$$;

-- The cached validators and items of a source; no row when it was never fetched.
CREATE FUNCTION mdame.get_feed_cache(p_source_url text)
RETURNS TABLE (etag text, last_modified text, items jsonb, fetched_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_source_url(p_source_url);
  RETURN QUERY SELECT c.etag, c.last_modified, c.items, c.fetched_at
                 FROM feed_cache c
                WHERE c.source_url = p_source_url AND c.fetched_at IS NOT NULL;
END
$$;

-- A full response (p_items given): its validators and items replace the cached ones. A 304
-- (p_items NULL): the cached items stay; validators the 304 carried refresh the stored ones.
-- Either way the source's failure streak ends. Returns the row id.
CREATE FUNCTION mdame.record_feed_fetch(p_source_url text, p_etag text, p_last_modified text,
                                        p_items jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._require_source_url(p_source_url);
  IF length(p_etag) > 1000 OR length(p_last_modified) > 200 THEN
    PERFORM mdame._invalid('etag or last_modified is too long');
  END IF;
  IF p_items IS NOT NULL THEN
    PERFORM mdame._require_json('items', p_items, 'array');
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
$$;

-- A failed fetch: counted on the source's row (created if needed, with no cached response)
-- and recorded as an event (subject 'feed_source', the row id) naming source and reason.
CREATE FUNCTION mdame.record_feed_failure(p_source_url text, p_reason text,
                                          p_execution_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

REVOKE ALL ON FUNCTION mdame._redact_keys(text), mdame._require_source_url(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.get_feed_cache(text),
  mdame.record_feed_fetch(text, text, text, jsonb),
  mdame.record_feed_failure(text, text, text)
TO mdame_app;
