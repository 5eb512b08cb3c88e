-- One publisher protocol: the outbox speaks YouTube's resumable protocol too.
--   * an upload session may live on the local filesystem (file://): the outbox's sessions;
--   * a published video the channel no longer has is recorded 'removed' (an alert, like a
--     failed processing), never an error that blocks the partition's other scripts;
--   * retire_publication: a publication of an account that was deactivated, with nothing
--     out and nothing in flight, ends 'failed' with its quota reservation released, so it
--     neither holds quota nor keeps its render forever.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

ALTER TABLE upload_sessions DROP CONSTRAINT upload_sessions_session_uri_check;
ALTER TABLE upload_sessions ADD CONSTRAINT upload_sessions_session_uri_check
  CHECK (session_uri ~ '^(https?|file)://' AND length(session_uri) <= 4000);

CREATE OR REPLACE FUNCTION mdame.open_upload_session(p_attempt_id bigint, p_session_uri text,
                                                     p_content_sha256 text, p_size_bytes bigint,
                                                     p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
  v_old upload_sessions;
BEGIN
  PERFORM mdame._require_match('session_uri', p_session_uri, '^(https?|file)://'),
          mdame._require_text('session_uri', p_session_uri, 4000),
          mdame._require_sha256('content_sha256', p_content_sha256),
          mdame._require_range('size_bytes', p_size_bytes, 1, 274877906944);
  v_pub := mdame._own_upload(p_attempt_id, p_lock_token);
  IF v_pub.payload ->> 'content_sha256' IS DISTINCT FROM p_content_sha256 THEN
    PERFORM mdame._invalid(format('publication %s uploads %s, not %s', v_pub.id,
                                  left(v_pub.payload ->> 'content_sha256', 12),
                                  left(p_content_sha256, 12)));
  END IF;
  SELECT * INTO v_old FROM upload_sessions WHERE attempt_id = p_attempt_id;
  IF v_old.attempt_id IS NOT NULL THEN
    IF (v_old.session_uri, v_old.content_sha256, v_old.size_bytes)
       IS DISTINCT FROM (p_session_uri, p_content_sha256, p_size_bytes) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: attempt %s already has an upload session', p_attempt_id);
    END IF;
    RETURN p_attempt_id;
  END IF;
  INSERT INTO upload_sessions (attempt_id, publication_id, session_uri, content_sha256,
                               size_bytes)
  VALUES (p_attempt_id, v_pub.id, p_session_uri, p_content_sha256, p_size_bytes);
  UPDATE provider_attempts SET detail = detail || jsonb_build_object('session', true),
                               updated_at = now()
   WHERE id = p_attempt_id;
  RETURN p_attempt_id;
END
$$;

CREATE OR REPLACE FUNCTION mdame.record_video_processing(p_publication_id bigint, p_status text,
                                                         p_detail jsonb, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
BEGIN
  PERFORM mdame._require_one_of('status', p_status,
                                ARRAY['processing', 'succeeded', 'failed', 'terminated',
                                      'removed']),
          mdame._require_json('detail', p_detail);
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  IF v_pub.state <> 'published' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s, not published', p_publication_id,
                       v_pub.state);
  END IF;
  UPDATE publications
     SET result = result || jsonb_build_object('processing', p_status), updated_at = now()
   WHERE id = p_publication_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('publication', p_publication_id,
          CASE WHEN p_status IN ('failed', 'terminated', 'removed') THEN 'alert'
               ELSE 'processing' END,
          p_detail || jsonb_build_object('processing', p_status,
                                         'video_id', v_pub.result ->> 'video_id'));
  RETURN p_status;
END
$$;

-- A pending publication of an inactive account ends 'failed', its reservation released. One
-- still uploading, or with an attempt whose outcome is unknown, is refused (MD003): the caller
-- settles it with the channel first. Returns the publication's state; a repeat is a no-op.
CREATE FUNCTION mdame.retire_publication(p_publication_id bigint, p_reason text,
                                         p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 2000);
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  IF v_pub.state IN ('published', 'failed') THEN
    RETURN v_pub.state;
  END IF;
  IF EXISTS (SELECT FROM dimension_accounts WHERE id = v_pub.account_id AND active) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is for an active account', p_publication_id);
  END IF;
  IF v_pub.state <> 'pending' OR EXISTS (
       SELECT FROM provider_attempts a WHERE a.work_key = v_pub.idempotency_key
          AND a.status IN ('submitted', 'unknown')) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s with an upload in flight: settle it first',
                       p_publication_id, v_pub.state);
  END IF;
  IF EXISTS (SELECT FROM quota_ledger WHERE quota_key = v_pub.idempotency_key
                AND state = 'reserved') THEN
    PERFORM mdame.release_quota(v_pub.idempotency_key);
  END IF;
  PERFORM mdame._transition('publication', v_pub.id, 'pending', 'failed',
                            jsonb_build_object('reason', p_reason));
  RETURN 'failed';
END
$$;

REVOKE ALL ON FUNCTION mdame.retire_publication(bigint, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mdame.retire_publication(bigint, text, bigint) TO mdame_app;
