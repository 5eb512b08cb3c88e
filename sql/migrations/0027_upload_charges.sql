-- What an upload's initiation costs, and a second look before a gone session counts as nothing.
--   * upload_charges: one row per attempt whose initiating request (YouTube's videos.insert, the
--     resumable POST) was about to be sent, recorded before it is sent. YouTube counts every
--     request it receives, answered or not, refused or not; the only answers that prove a call
--     was not counted are a quotaExceeded (the bucket was full: nothing was added) and an
--     authentication refusal (401: no project to charge), and a request that never left is not
--     counted either. The publisher records those as `counted = false`. Any other initiation
--     keeps its insert reservation spent: committed as soon as the session is committed, and
--     when its attempt fails moved to a key of its own (<publication key>:initiation:<attempt>)
--     so the publication can reserve again for its next session. The ledger thus never counts
--     less than the channel; it counts one more only for an initiation recorded as about to be
--     sent that never reached the channel (the run died in between, or the request was cut
--     before the channel read it).
--   * A session found gone (404/410) may belong to an upload that completed while its answer
--     was lost, and the channel's uploads list a new video only after a while. gone_seen_at is
--     when this session was first found gone (an upper bound of its last activity: every
--     earlier request, this holder's or a lapsed holder's, had ended by then); the upload is
--     settled as not published only from a second search of the uploads asked at or after
--     gone_settle_after (gone_seen_at plus the publisher's recheck delay). Until then it stays
--     'uploading' with its attempt 'unknown', and the next run searches again.
--   * upload_lease: this holder's lease on its attempt, read before each request to the channel
--     so that the request ends before another holder may take the upload over.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE TABLE upload_charges (
  attempt_id     bigint PRIMARY KEY REFERENCES provider_attempts (id),
  publication_id bigint NOT NULL REFERENCES publications (id),
  counted        boolean NOT NULL DEFAULT true,
  reason         text CHECK (length(reason) <= 500),
  quota_key      text CHECK (length(quota_key) <= 512),  -- the entry kept once the attempt failed
  sent_at        timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upload_charges_publication_idx ON upload_charges (publication_id);
ALTER TABLE upload_charges ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON upload_charges FOR SELECT TO mdame_app USING (true);
CREATE POLICY admin_reads ON upload_charges FOR SELECT TO mdame_admin USING (true);
GRANT SELECT ON upload_charges TO mdame_app, mdame_admin;

ALTER TABLE upload_sessions
  ADD COLUMN gone_seen_at timestamptz,
  ADD COLUMN gone_settle_after timestamptz,
  ADD CONSTRAINT upload_sessions_gone_check
    CHECK ((gone_seen_at IS NULL) = (gone_settle_after IS NULL)
           AND (gone_settle_after IS NULL OR gone_settle_after >= gone_seen_at));

-- Whether the channel may have counted this attempt's initiation: recorded as about to be sent
-- and not shown uncounted since. A publisher whose channel charges only a published video (the
-- local outbox) records none.
CREATE FUNCTION mdame._initiation_counted(p_attempt_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT FROM mdame.upload_charges c WHERE c.attempt_id = p_attempt_id AND c.counted)
$$;

-- This holder's lease on its upload attempt (its lock's expiry plus the attempt's grace, moved on
-- by the lock's heartbeats) and the database's clock: the holder ends each request before it.
CREATE FUNCTION mdame.upload_lease(p_attempt_id bigint, p_lock_token bigint)
RETURNS TABLE (db_now timestamptz, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
BEGIN
  PERFORM mdame._own_upload(p_attempt_id, p_lock_token);
  RETURN QUERY SELECT now(), a.lease_expires_at FROM provider_attempts a
                WHERE a.id = p_attempt_id;
END
$$;

-- Records this holder's initiation: with p_counted true right before the request is sent (from
-- then on the channel may have counted it); with false once its answer proved it was not
-- counted, or it was never sent (p_reason says which). A session proves it counted: then false
-- is refused (MD003). Repeating the same value is a no-op; false never turns back to true.
CREATE FUNCTION mdame.record_upload_initiation(p_attempt_id bigint, p_counted boolean,
                                               p_reason text, p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
  v_old upload_charges;
BEGIN
  PERFORM mdame._require_not_null('counted', p_counted);
  IF NOT p_counted THEN
    PERFORM mdame._require_text('reason', p_reason, 500);
  ELSIF p_reason IS NOT NULL THEN
    PERFORM mdame._require_text('reason', p_reason, 500);
  END IF;
  v_pub := mdame._own_upload(p_attempt_id, p_lock_token);
  SELECT * INTO v_old FROM upload_charges WHERE attempt_id = p_attempt_id FOR UPDATE;
  IF v_old.attempt_id IS NULL THEN
    IF NOT p_counted THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006',
        MESSAGE = format('mdame: attempt %s recorded no initiation to take back', p_attempt_id);
    END IF;
    INSERT INTO upload_charges (attempt_id, publication_id, reason)
    VALUES (p_attempt_id, v_pub.id, p_reason);
    RETURN true;
  END IF;
  IF v_old.counted = p_counted THEN
    RETURN p_counted;
  ELSIF p_counted THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: attempt %s''s initiation was shown not counted (%s)', p_attempt_id,
                       mdame._clip(v_old.reason, 200));
  ELSIF EXISTS (SELECT FROM upload_sessions WHERE attempt_id = p_attempt_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: attempt %s has an upload session: its initiation was counted',
                       p_attempt_id);
  END IF;
  UPDATE upload_charges SET counted = false, reason = p_reason, updated_at = now()
   WHERE attempt_id = p_attempt_id;
  RETURN false;
END
$$;

-- The session of this holder's attempt answered 404/410 to a request asked at p_asked_at (the
-- database's clock, read before asking). The first time, records it and when a search may settle
-- the upload as not published (p_recheck_seconds later). Returns both.
CREATE FUNCTION mdame.record_session_gone(p_attempt_id bigint, p_asked_at timestamptz,
                                          p_recheck_seconds double precision, p_lock_token bigint)
RETURNS TABLE (gone_seen_at timestamptz, gone_settle_after timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
#variable_conflict use_column
DECLARE
  v_session upload_sessions;
BEGIN
  PERFORM mdame._require_not_null('asked_at', p_asked_at);
  IF p_asked_at > now() THEN
    PERFORM mdame._invalid(format('asked_at %s is later than the database''s clock %s',
                                  p_asked_at, now()));
  END IF;
  IF p_recheck_seconds IS NULL OR p_recheck_seconds < 0 OR p_recheck_seconds > 86400
     OR p_recheck_seconds = 'NaN'::double precision THEN
    PERFORM mdame._invalid(format('recheck_seconds must be between 0 and 86400 (got %s)',
                                  coalesce(p_recheck_seconds::text, 'NULL')));
  END IF;
  PERFORM mdame._own_upload(p_attempt_id, p_lock_token);
  SELECT * INTO v_session FROM upload_sessions WHERE attempt_id = p_attempt_id FOR UPDATE;
  IF v_session.attempt_id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: attempt %s has no upload session', p_attempt_id);
  END IF;
  IF v_session.gone_seen_at IS NULL THEN
    UPDATE upload_sessions
       SET gone_seen_at = p_asked_at,
           gone_settle_after = p_asked_at + p_recheck_seconds * interval '1 second'
     WHERE attempt_id = p_attempt_id
    RETURNING * INTO v_session;
  END IF;
  RETURN QUERY SELECT v_session.gone_seen_at, v_session.gone_settle_after;
END
$$;

-- The attempt's insert reservation stays spent: committed under a key of its own, so that the
-- publication's key is free for the reservation of its next session.
CREATE FUNCTION mdame._keep_upload_charge(p_pub mdame.publications, p_attempt_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text := p_pub.idempotency_key || ':initiation:' || p_attempt_id;
BEGIN
  UPDATE mdame.quota_ledger SET quota_key = v_key, state = 'committed', updated_at = now()
   WHERE quota_key = p_pub.idempotency_key AND state <> 'released';
  IF FOUND THEN
    UPDATE mdame.upload_charges SET quota_key = v_key, updated_at = now()
     WHERE attempt_id = p_attempt_id;
  END IF;
END
$$;

-- 0005's settlement, where a failed attempt whose initiation the channel may have counted keeps
-- its reservation spent instead of releasing it.
CREATE OR REPLACE FUNCTION mdame._settle_upload(p_pub publications, p_attempt provider_attempts,
                                                p_status text, p_video_id text, p_detail jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text := p_pub.state;
BEGIN
  IF p_status = 'succeeded' THEN
    IF p_video_id IS NULL OR p_video_id = '' THEN
      PERFORM mdame._invalid('a succeeded upload needs its video_id');
    END IF;
    IF v_state = 'uploading' THEN
      PERFORM mdame._transition('publication', p_pub.id, 'uploading', 'published',
                                p_detail || jsonb_build_object('video_id', p_video_id));
      v_state := 'published';
    END IF;
    PERFORM mdame.commit_quota(p_pub.idempotency_key);
  ELSIF p_status = 'failed' THEN
    IF v_state = 'uploading' THEN
      PERFORM mdame._transition('publication', p_pub.id, 'uploading', 'pending', p_detail);
      v_state := 'pending';
    END IF;
    IF mdame._initiation_counted(p_attempt.id) THEN
      PERFORM mdame._keep_upload_charge(p_pub, p_attempt.id);
    ELSE
      PERFORM mdame.release_quota(p_pub.idempotency_key);
    END IF;
  END IF;
  RETURN v_state;
END
$$;

-- 0021's open_upload_session; a session proves the initiation went through, so a counted one's
-- reservation is committed here already.
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
  IF EXISTS (SELECT FROM upload_charges WHERE attempt_id = p_attempt_id AND NOT counted) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: attempt %s''s initiation was recorded as not counted: it has no '
                       'session', p_attempt_id);
  END IF;
  INSERT INTO upload_sessions (attempt_id, publication_id, session_uri, content_sha256,
                               size_bytes)
  VALUES (p_attempt_id, v_pub.id, p_session_uri, p_content_sha256, p_size_bytes);
  UPDATE provider_attempts SET detail = detail || jsonb_build_object('session', true),
                               updated_at = now()
   WHERE id = p_attempt_id;
  IF EXISTS (SELECT FROM upload_charges WHERE attempt_id = p_attempt_id)
     AND EXISTS (SELECT FROM quota_ledger WHERE quota_key = v_pub.idempotency_key
                    AND state = 'reserved') THEN
    PERFORM mdame.commit_quota(v_pub.idempotency_key);
  END IF;
  RETURN p_attempt_id;
END
$$;

-- 0005's reconcile_upload; settling as not published an upload whose session was committed needs
-- that session found gone, and a search asked after that sighting and at or after
-- gone_settle_after (MD003 otherwise: search again later).
CREATE OR REPLACE FUNCTION mdame.reconcile_upload(p_publication_id bigint, p_video_id text,
                                                  p_asked_at timestamptz, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_session upload_sessions;
  v_status text := CASE WHEN p_video_id IS NULL OR p_video_id = '' THEN 'failed' ELSE 'succeeded' END;
BEGIN
  PERFORM mdame._require_not_null('asked_at', p_asked_at);
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = v_pub.idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_attempt.status IN ('submitted', 'unknown') THEN
    PERFORM mdame._require_attempt_holder(v_attempt.id, p_lock_token, p_asked_at);
    IF v_status = 'failed' THEN
      SELECT * INTO v_session FROM upload_sessions WHERE attempt_id = v_attempt.id;
      IF v_session.attempt_id IS NOT NULL AND (v_session.gone_seen_at IS NULL
           OR p_asked_at <= v_session.gone_seen_at OR p_asked_at < v_session.gone_settle_after)
      THEN
        RAISE EXCEPTION USING ERRCODE = 'MD003',
          MESSAGE = format('mdame: publication %s''s session was %s: it is settled as not '
                           'published only from a second search asked at or after %s, not at %s',
                           p_publication_id,
                           CASE WHEN v_session.gone_seen_at IS NULL THEN 'never found gone'
                                ELSE 'first found gone at ' || v_session.gone_seen_at END,
                           coalesce(v_session.gone_settle_after::text, 'its sighting'),
                           p_asked_at);
      END IF;
    END IF;
    PERFORM mdame._reconcile_attempt(v_attempt.id, v_status,
                                     jsonb_build_object('video_id', p_video_id));
  ELSIF v_pub.state <> 'uploading' THEN
    RETURN v_pub.state;  -- nothing unsettled: a repeat after a lost reply
  END IF;
  RETURN mdame._settle_upload(v_pub, v_attempt, v_status, p_video_id,
                              '{"reconciled": true}'::jsonb);
END
$$;

REVOKE ALL ON FUNCTION
  mdame._initiation_counted(bigint),
  mdame._keep_upload_charge(mdame.publications, bigint),
  mdame.upload_lease(bigint, bigint),
  mdame.record_upload_initiation(bigint, boolean, text, bigint),
  mdame.record_session_gone(bigint, timestamptz, double precision, bigint)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.upload_lease(bigint, bigint),
  mdame.record_upload_initiation(bigint, boolean, text, bigint),
  mdame.record_session_gone(bigint, timestamptz, double precision, bigint)
TO mdame_app;
