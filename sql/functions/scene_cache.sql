-- The scene cache: a generated clip by the hash of what made it.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Returns the cached clip for a scene hash, or no row when missing or expired.
CREATE OR REPLACE FUNCTION mdame.lookup_scene_cache(p_scene_hash text)
 RETURNS TABLE(uri text, content_sha256 text, expires_at timestamp with time zone, detail jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128);
  RETURN QUERY
  SELECT c.uri, c.content_sha256, c.expires_at, c.detail FROM scene_cache c
   WHERE c.scene_hash = p_scene_hash AND c.expires_at > now();
END
$function$;
REVOKE ALL ON FUNCTION mdame.lookup_scene_cache(p_scene_hash text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.lookup_scene_cache(p_scene_hash text) TO mdame_app;

-- Stores a clip for a scene hash, idempotently: the same clip again refreshes the TTL; a live
-- entry with another clip wins (first writer wins, two GPU workers racing on one scene converge);
-- an expired entry is replaced. p_detail: what made the clip (engine, relevance, source), kept
-- with it. Returns the entry in effect.
CREATE OR REPLACE FUNCTION mdame.put_scene_cache(p_scene_hash text, p_uri text, p_content_sha256 text, p_ttl_seconds integer, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS TABLE(uri text, content_sha256 text, expires_at timestamp with time zone, detail jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_ttl interval := mdame._seconds('ttl_seconds', p_ttl_seconds);
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128), mdame._require_text('uri', p_uri, 2000),
          mdame._require_sha256('content_sha256', p_content_sha256),
          mdame._require_json('detail', p_detail);
  INSERT INTO scene_cache AS c (scene_hash, uri, content_sha256, expires_at, detail)
  VALUES (p_scene_hash, p_uri, p_content_sha256, now() + v_ttl, p_detail)
  ON CONFLICT (scene_hash) DO UPDATE
    SET uri = excluded.uri, content_sha256 = excluded.content_sha256,
        detail = CASE WHEN c.expires_at <= now() THEN excluded.detail ELSE c.detail END,
        created_at = CASE WHEN c.expires_at <= now() THEN now() ELSE c.created_at END,
        expires_at = CASE WHEN c.expires_at <= now() THEN excluded.expires_at
                          ELSE greatest(c.expires_at, excluded.expires_at) END
    WHERE c.expires_at <= now()
       OR (c.uri = excluded.uri AND c.content_sha256 = excluded.content_sha256);
  RETURN QUERY
  SELECT c.uri, c.content_sha256, c.expires_at, c.detail FROM scene_cache c
   WHERE c.scene_hash = p_scene_hash;
END
$function$;
REVOKE ALL ON FUNCTION mdame.put_scene_cache(p_scene_hash text, p_uri text, p_content_sha256 text, p_ttl_seconds integer, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.put_scene_cache(p_scene_hash text, p_uri text, p_content_sha256 text, p_ttl_seconds integer, p_detail jsonb) TO mdame_admin;

CREATE OR REPLACE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_deleted integer;
BEGIN
  PERFORM mdame._require_text('scene_hash', p_scene_hash, 128), mdame._require_text('uri', p_uri, 2000),
          mdame._require_text('reason', p_reason, 2000);
  DELETE FROM scene_cache WHERE scene_hash = p_scene_hash AND uri = p_uri;
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  IF v_deleted > 0 THEN
    INSERT INTO events (subject_kind, subject_id, event, detail)
    VALUES ('scene_cache', 0, 'invalidated',
            jsonb_build_object('scene_hash', p_scene_hash, 'uri', p_uri, 'reason', left(p_reason, 500)));
  END IF;
  RETURN v_deleted > 0;
END
$function$;
REVOKE ALL ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text) TO mdame_admin;

-- A GPU worker holds no pipeline lock but the lease of the job that makes the scene: it may drop
-- that scene's entry, and no other.
CREATE OR REPLACE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_job jobs;
BEGIN
  PERFORM mdame._require_lease_args(p_job_id, p_worker_id, p_attempt),
          mdame._require_not_null('lease_secret', p_lease_secret);
  SELECT * INTO v_job FROM jobs
   WHERE id = p_job_id AND state = 'running' AND lease_owner = p_worker_id
     AND attempt = p_attempt AND lease_secret_sha256 = mdame._lock_secret_sha256(p_lease_secret)
     FOR SHARE;
  IF v_job.id IS NULL THEN
    PERFORM mdame._job_lease_lost(p_job_id, p_worker_id, p_attempt);
  END IF;
  IF v_job.payload ->> 'scene_hash' IS DISTINCT FROM p_scene_hash THEN
    PERFORM mdame._invalid(format('job %s makes scene %s, not %s', p_job_id,
                                  mdame._clip(v_job.payload ->> 'scene_hash', 80),
                                  mdame._clip(p_scene_hash, 80)));
  END IF;
  RETURN mdame.invalidate_scene_cache(p_scene_hash, p_uri, p_reason);
END
$function$;
REVOKE ALL ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_job_id bigint, p_worker_id text, p_attempt integer, p_lease_secret bigint) TO mdame_app;

-- A clip stage that finds a cache entry's file gone or altered drops the entry. The cache is
-- shared by every dimension, so the fence is a live pipeline lock, and the entry is dropped only
-- if it still names the uri the caller checked.
CREATE OR REPLACE FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence_token(p_lock_token);
  RETURN mdame.invalidate_scene_cache(p_scene_hash, p_uri, p_reason);
END
$function$;
REVOKE ALL ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.invalidate_scene_cache(p_scene_hash text, p_uri text, p_reason text, p_lock_token bigint) TO mdame_app;
