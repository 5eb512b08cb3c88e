-- Publishing: an upload's recovery point and outcome, bucket-charged uploads, resumable sessions.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- No new publication for an inactive account, whichever code path inserts it. MD003 is not
-- one of the errors upsert_work_unit maps, so it reaches the caller as it is.
CREATE OR REPLACE FUNCTION mdame._publication_account_is_active()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_account mdame.dimension_accounts;
BEGIN
  SELECT * INTO v_account FROM mdame.dimension_accounts WHERE id = NEW.account_id;
  IF v_account.id IS NOT NULL AND NOT v_account.active THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: account %s (%s/%s) is inactive: no new publication',
                       v_account.id, v_account.platform, mdame._clip(v_account.handle));
  END IF;
  RETURN NEW;
END
$function$;
REVOKE ALL ON FUNCTION mdame._publication_account_is_active() FROM PUBLIC, mdame_app, mdame_admin;
CREATE OR REPLACE TRIGGER publication_account_is_active BEFORE INSERT ON mdame.publications FOR EACH ROW EXECUTE FUNCTION mdame._publication_account_is_active();

CREATE OR REPLACE FUNCTION mdame.begin_upload(p_idempotency_key text, p_payload jsonb, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint)
 RETURNS TABLE(publication_id bigint, action text, attempt_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  RETURN QUERY SELECT * FROM mdame._begin_upload(p_idempotency_key, p_payload, 'units', p_units,
                                                 p_provider, p_required_reviews, p_grace_seconds,
                                                 p_lock_token);
END
$function$;
REVOKE ALL ON FUNCTION mdame.begin_upload(p_idempotency_key text, p_payload jsonb, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.begin_upload(p_idempotency_key text, p_payload jsonb, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint) TO mdame_app;

-- Settles an upload attempt and its publication together: succeeded -> published with the
-- video id and the quota committed; failed (a definite refusal) -> pending again with the quota
-- released, except that a failed attempt whose initiation the channel may have counted keeps
-- its reservation spent; unknown (no answer) -> everything stays reserved for reconcile_upload.
CREATE OR REPLACE FUNCTION mdame._settle_upload(p_pub mdame.publications, p_attempt mdame.provider_attempts, p_status text, p_video_id text, p_detail jsonb)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._settle_upload(p_pub mdame.publications, p_attempt mdame.provider_attempts, p_status text, p_video_id text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._attempt_publication(p_attempt_id bigint)
 RETURNS mdame.publications
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_pub mdame.publications;
BEGIN
  SELECT p.* INTO v_pub FROM mdame.publications p
    JOIN mdame.provider_attempts a ON a.work_key = p.idempotency_key
   WHERE a.id = mdame._require_not_null('attempt_id', p_attempt_id);
  IF v_pub.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: attempt %s is not a publication''s upload', p_attempt_id);
  END IF;
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), v_pub.id);
  RETURN v_pub;
END
$function$;
REVOKE ALL ON FUNCTION mdame._attempt_publication(p_attempt_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- The outcome of this holder's own upload. Returns the publication's state.
CREATE OR REPLACE FUNCTION mdame.finish_upload(p_attempt_id bigint, p_status text, p_video_id text, p_detail jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_pub publications := mdame._attempt_publication(p_attempt_id);
  v_attempt provider_attempts;
  v_token bigint;
BEGIN
  PERFORM mdame._require_one_of('status', p_status, ARRAY['succeeded', 'failed', 'unknown']),
          mdame._require_json('detail', p_detail);
  v_token := mdame._fence(mdame._unit_dimension('publication', v_pub.id), p_lock_token);
  v_attempt := mdame._require_attempt_holder(p_attempt_id, v_token, NULL);
  PERFORM mdame._finish_attempt(p_attempt_id, p_status,
                                p_detail || jsonb_build_object('video_id', p_video_id));
  RETURN mdame._settle_upload(v_pub, v_attempt, p_status, p_video_id, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.finish_upload(p_attempt_id bigint, p_status text, p_video_id text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.finish_upload(p_attempt_id bigint, p_status text, p_video_id text, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- Settles the publication's unsettled upload from the channel's answer (p_video_id, NULL when
-- the channel has none), asked at p_asked_at (the database's clock, read before asking).
-- Another holder's submission may only be settled from an answer asked after its lease ended.
-- Returns the publication's state. Settling as not published an upload whose session was
-- committed needs that session found gone, and a search asked after that sighting and at or
-- after gone_settle_after (MD003 otherwise: search again later).
CREATE OR REPLACE FUNCTION mdame.reconcile_upload(p_publication_id bigint, p_video_id text, p_asked_at timestamp with time zone, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_session upload_sessions;
  v_status text := CASE WHEN p_video_id IS NULL OR p_video_id = '' THEN 'failed' ELSE 'succeeded' END;
  v_token bigint;
BEGIN
  PERFORM mdame._require_not_null('asked_at', p_asked_at);
  v_token := mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = v_pub.idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_attempt.status IN ('submitted', 'unknown') THEN
    PERFORM mdame._require_attempt_holder(v_attempt.id, v_token, p_asked_at);
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
$function$;
REVOKE ALL ON FUNCTION mdame.reconcile_upload(p_publication_id bigint, p_video_id text, p_asked_at timestamp with time zone, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.reconcile_upload(p_publication_id bigint, p_video_id text, p_asked_at timestamp with time zone, p_lock_token bigint) TO mdame_app;

-- Why an account may not start an upload now (NULL: it may).
CREATE OR REPLACE FUNCTION mdame._account_blocked(p_account_id bigint)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  SELECT CASE WHEN a.needs_reauth THEN 'needs_reauth'
              WHEN a.paused_until > now() THEN coalesce(a.pause_reason, 'paused')
         END
    FROM mdame.dimension_accounts a WHERE a.id = p_account_id
$function$;
REVOKE ALL ON FUNCTION mdame._account_blocked(p_account_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Pauses an account the channel refused: 'quotaExceeded' until its next quota day begins,
-- 'uploadLimitExceeded' for 24 hours. Returns the end of the pause.
CREATE OR REPLACE FUNCTION mdame.pause_account(p_account_id bigint, p_reason text, p_lock_token bigint)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_account dimension_accounts;
  v_until timestamptz;
BEGIN
  -- YouTube's daily quota and 24-hour upload limit; TikTok's daily post cap and its unaudited
  -- app's cap on posting creators, and Instagram's publishing limit (24-hour windows).
  PERFORM mdame._require_one_of('reason', p_reason,
                                ARRAY['quotaExceeded', 'uploadLimitExceeded',
                                      'spam_risk_too_many_posts', 'reached_active_user_cap',
                                      'content_publishing_limit']);
  SELECT * INTO v_account FROM dimension_accounts
   WHERE id = mdame._require_not_null('account_id', p_account_id);
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  PERFORM mdame._fence(v_account.dimension_id, p_lock_token);
  v_until := CASE p_reason
    WHEN 'quotaExceeded' THEN
      ((mdame._quota_day(v_account.quota_timezone) + 1)::timestamp
        AT TIME ZONE v_account.quota_timezone)
    ELSE now() + interval '24 hours' END;
  UPDATE dimension_accounts
     SET paused_until = greatest(coalesce(paused_until, v_until), v_until),
         pause_reason = p_reason, updated_at = now()
   WHERE id = p_account_id
  RETURNING paused_until INTO v_until;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('account', p_account_id, 'account_paused',
          jsonb_build_object('reason', p_reason, 'until', v_until));
  RETURN v_until;
END
$function$;
REVOKE ALL ON FUNCTION mdame.pause_account(p_account_id bigint, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.pause_account(p_account_id bigint, p_reason text, p_lock_token bigint) TO mdame_app;

-- A revoked or expired grant: no publishing to the account until it is connected again, and an
-- alert event. Returns true when this call marked it.
CREATE OR REPLACE FUNCTION mdame.mark_needs_reauth(p_account_id bigint, p_reason text, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_account dimension_accounts;
BEGIN
  PERFORM mdame._require_text('reason', p_reason, 500);
  SELECT * INTO v_account FROM dimension_accounts
   WHERE id = mdame._require_not_null('account_id', p_account_id) FOR NO KEY UPDATE;
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  PERFORM mdame._fence(v_account.dimension_id, p_lock_token);
  IF v_account.needs_reauth THEN
    RETURN false;
  END IF;
  UPDATE dimension_accounts SET needs_reauth = true, updated_at = now() WHERE id = p_account_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('account', p_account_id, 'alert',
          jsonb_build_object('alert', 'needs_reauth', 'reason', p_reason,
                             'handle', v_account.handle));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.mark_needs_reauth(p_account_id bigint, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.mark_needs_reauth(p_account_id bigint, p_reason text, p_lock_token bigint) TO mdame_app;

-- Returns (publication_id, action, attempt_id): action 'published' (nothing to do), 'no_quota'
-- (nothing reserved), 'reconcile' (an earlier submission's outcome must be settled first;
-- attempt_id is it), 'submit' (upload now, then finish_upload(attempt_id)), or 'skipped'
-- for an account that may not start an upload now (paused, or needs_reauth).
CREATE OR REPLACE FUNCTION mdame._begin_upload(p_idempotency_key text, p_payload jsonb, p_bucket text, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint)
 RETURNS TABLE(publication_id bigint, action text, attempt_id bigint)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_sha text := p_payload ->> 'content_sha256';
BEGIN
  PERFORM mdame._fence(mdame._payload_dimension('publication', p_payload), p_lock_token);
  PERFORM mdame._require_sha256('payload.content_sha256', v_sha),
          mdame._require_one_of('bucket', p_bucket, ARRAY['insert', 'search', 'units']);
  v_pub.id := mdame._upsert_work_unit('publication', p_idempotency_key, p_payload);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), v_pub.id);
  SELECT * INTO v_pub FROM publications WHERE id = v_pub.id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = p_idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_pub.state = 'published' THEN
    RETURN QUERY SELECT v_pub.id, 'published'::text, v_attempt.id;
    RETURN;
  ELSIF v_pub.state = 'uploading' OR v_attempt.status IN ('submitted', 'unknown') THEN
    RETURN QUERY SELECT v_pub.id, 'reconcile'::text, v_attempt.id;
    RETURN;
  ELSIF v_pub.state <> 'pending' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s', v_pub.id, v_pub.state);
  END IF;
  IF NOT mdame.is_approved(v_pub.render_id, v_sha, p_required_reviews) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: render %s is not approved as %s by every one of %s',
                       v_pub.render_id, left(v_sha, 12),
                       mdame._clip(array_to_string(p_required_reviews, ', '), 200));
  END IF;
  IF mdame._account_blocked(v_pub.account_id) IS NOT NULL THEN
    RETURN QUERY SELECT v_pub.id, 'skipped'::text, NULL::bigint;
    RETURN;
  END IF;
  IF mdame._reserve_quota(v_pub.account_id, p_bucket, p_units, p_idempotency_key) IS NULL THEN
    RETURN QUERY SELECT v_pub.id, 'no_quota'::text, NULL::bigint;
    RETURN;
  END IF;
  PERFORM mdame._transition('publication', v_pub.id, 'pending', 'uploading', '{}');
  v_attempt.id := mdame.record_attempt(p_idempotency_key, p_provider, v_sha, 'submitted', '{}',
                                       p_lock_token, p_grace_seconds);
  RETURN QUERY SELECT v_pub.id, 'submit'::text, v_attempt.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._begin_upload(p_idempotency_key text, p_payload jsonb, p_bucket text, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- begin_upload charged to a bucket (YouTube: 'insert', 1 call).
CREATE OR REPLACE FUNCTION mdame.begin_bucket_upload(p_idempotency_key text, p_payload jsonb, p_bucket text, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint)
 RETURNS TABLE(publication_id bigint, action text, attempt_id bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  RETURN QUERY SELECT * FROM mdame._begin_upload(p_idempotency_key, p_payload, p_bucket, p_units,
                                                 p_provider, p_required_reviews, p_grace_seconds,
                                                 p_lock_token);
END
$function$;
REVOKE ALL ON FUNCTION mdame.begin_bucket_upload(p_idempotency_key text, p_payload jsonb, p_bucket text, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.begin_bucket_upload(p_idempotency_key text, p_payload jsonb, p_bucket text, p_units integer, p_provider text, p_required_reviews text[], p_grace_seconds integer, p_lock_token bigint) TO mdame_app;

-- The attempt this holder submits (its own, 'submitted') and its publication, locked.
CREATE OR REPLACE FUNCTION mdame._own_upload(p_attempt_id bigint, p_lock_token bigint)
 RETURNS mdame.publications
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_pub mdame.publications := mdame._attempt_publication(p_attempt_id);
  v_attempt mdame.provider_attempts;
  v_token bigint;
BEGIN
  v_token := mdame._fence(mdame._unit_dimension('publication', v_pub.id), p_lock_token);
  SELECT * INTO v_attempt FROM mdame.provider_attempts WHERE id = p_attempt_id;
  IF v_attempt.status <> 'submitted' OR v_attempt.lock_token IS DISTINCT FROM v_token
     OR v_pub.state <> 'uploading' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: attempt %s is %s under token %s and its publication %s: not '
                       'this holder''s upload in flight', p_attempt_id, v_attempt.status,
                       v_attempt.lock_token, v_pub.state);
  END IF;
  RETURN v_pub;
END
$function$;
REVOKE ALL ON FUNCTION mdame._own_upload(p_attempt_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- Records the resumable session an initiation opened. A session proves the initiation went
-- through, so a counted one's
-- reservation is committed here already.
CREATE OR REPLACE FUNCTION mdame.open_upload_session(p_attempt_id bigint, p_session_uri text, p_content_sha256 text, p_size_bytes bigint, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.open_upload_session(p_attempt_id bigint, p_session_uri text, p_content_sha256 text, p_size_bytes bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.open_upload_session(p_attempt_id bigint, p_session_uri text, p_content_sha256 text, p_size_bytes bigint, p_lock_token bigint) TO mdame_app;

-- Hands the publication's unsettled upload to this holder: allowed for its own attempt, or for
-- another holder's once that holder's lease ran out (it has stopped sending by then). The
-- attempt is 'submitted' again under this token and lease. Returns the attempt and its session
-- (NULL columns when none was committed: then no byte was sent).
CREATE OR REPLACE FUNCTION mdame.resume_upload(p_publication_id bigint, p_lock_token bigint)
 RETURNS TABLE(attempt_id bigint, session_uri text, content_sha256 text, size_bytes bigint)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_pub publications;
  v_attempt provider_attempts;
  v_lock system_locks;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  v_lock := mdame._fence_token(p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  SELECT * INTO v_attempt FROM provider_attempts
   WHERE work_key = v_pub.idempotency_key ORDER BY attempt_no DESC LIMIT 1;
  IF v_pub.state <> 'uploading' OR v_attempt.status NOT IN ('submitted', 'unknown') THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s with attempt %s: nothing to resume',
                       p_publication_id, v_pub.state, coalesce(v_attempt.status, 'none'));
  END IF;
  PERFORM mdame._require_attempt_holder(v_attempt.id, v_lock.token, now());
  UPDATE provider_attempts
     SET lock_token = v_lock.token, status = 'submitted',
         lease_expires_at = v_lock.expires_at
                            + coalesce(lease_grace_seconds, 0) * interval '1 second',
         detail = detail || jsonb_build_object('resumed_from', v_attempt.lock_token),
         updated_at = now()
   WHERE id = v_attempt.id;
  RETURN QUERY SELECT v_attempt.id, s.session_uri, s.content_sha256, s.size_bytes
                 FROM (SELECT 1) one
                 LEFT JOIN upload_sessions s ON s.attempt_id = v_attempt.id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.resume_upload(p_publication_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.resume_upload(p_publication_id bigint, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.record_video_processing(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.record_video_processing(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_video_processing(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- A published video's custom thumbnail: set, refused by the channel (not a failure of the
-- publication) or failed. Recorded once: the first outcome stands (a retried run that finds it
-- does not set the thumbnail again).
CREATE OR REPLACE FUNCTION mdame.record_thumbnail(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_pub publications;
BEGIN
  PERFORM mdame._require_not_null('publication_id', p_publication_id),
          mdame._require_one_of('status', p_status, ARRAY['set', 'refused', 'failed']),
          mdame._require_json('detail', p_detail);
  IF length(p_detail::text) > 4000 THEN
    PERFORM mdame._invalid('detail is over 4000 characters');
  END IF;
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  IF v_pub.state <> 'published' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s, not published', p_publication_id,
                       v_pub.state);
  END IF;
  IF v_pub.result ? 'thumbnail' THEN
    RETURN v_pub.result -> 'thumbnail' ->> 'status';
  END IF;
  UPDATE publications
     SET result = result || jsonb_build_object('thumbnail', p_detail || jsonb_build_object(
                                                 'status', p_status)),
         updated_at = now()
   WHERE id = p_publication_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('publication', p_publication_id, 'thumbnail',
          p_detail || jsonb_build_object('status', p_status));
  RETURN p_status;
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_thumbnail(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_thumbnail(p_publication_id bigint, p_status text, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- A pending publication of an inactive account ends 'failed', its reservation released. One
-- still uploading, or with an attempt whose outcome is unknown, is refused (MD003): the caller
-- settles it with the channel first. Returns the publication's state; a repeat is a no-op.
CREATE OR REPLACE FUNCTION mdame.retire_publication(p_publication_id bigint, p_reason text, p_lock_token bigint)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.retire_publication(p_publication_id bigint, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.retire_publication(p_publication_id bigint, p_reason text, p_lock_token bigint) TO mdame_app;

-- Whether the channel may have counted this attempt's initiation: recorded as about to be sent
-- and not shown uncounted since. A publisher whose channel charges only a published video (the
-- local outbox) records none.
CREATE OR REPLACE FUNCTION mdame._initiation_counted(p_attempt_id bigint)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  SELECT EXISTS (SELECT FROM mdame.upload_charges c WHERE c.attempt_id = p_attempt_id AND c.counted)
$function$;
REVOKE ALL ON FUNCTION mdame._initiation_counted(p_attempt_id bigint) FROM PUBLIC, mdame_app, mdame_admin;

-- This holder's lease on its upload attempt (its lock's expiry plus the attempt's grace, moved on
-- by the lock's heartbeats) and the database's clock: the holder ends each request before it.
CREATE OR REPLACE FUNCTION mdame.upload_lease(p_attempt_id bigint, p_lock_token bigint)
 RETURNS TABLE(db_now timestamp with time zone, lease_expires_at timestamp with time zone)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
  PERFORM mdame._own_upload(p_attempt_id, p_lock_token);
  RETURN QUERY SELECT now(), a.lease_expires_at FROM provider_attempts a
                WHERE a.id = p_attempt_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.upload_lease(p_attempt_id bigint, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.upload_lease(p_attempt_id bigint, p_lock_token bigint) TO mdame_app;

-- Records this holder's initiation: with p_counted true right before the request is sent (from
-- then on the channel may have counted it); with false once its answer proved it was not
-- counted, or it was never sent (p_reason says which). A session proves it counted: then false
-- is refused (MD003). Repeating the same value is a no-op; false never turns back to true.
CREATE OR REPLACE FUNCTION mdame.record_upload_initiation(p_attempt_id bigint, p_counted boolean, p_reason text, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.record_upload_initiation(p_attempt_id bigint, p_counted boolean, p_reason text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_upload_initiation(p_attempt_id bigint, p_counted boolean, p_reason text, p_lock_token bigint) TO mdame_app;

-- The session of this holder's attempt answered 404/410 to a request asked at p_asked_at (the
-- database's clock, read before asking). The first time, records it and when a search may settle
-- the upload as not published (p_recheck_seconds later). Returns both.
CREATE OR REPLACE FUNCTION mdame.record_session_gone(p_attempt_id bigint, p_asked_at timestamp with time zone, p_recheck_seconds double precision, p_lock_token bigint)
 RETURNS TABLE(gone_seen_at timestamp with time zone, gone_settle_after timestamp with time zone)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.record_session_gone(p_attempt_id bigint, p_asked_at timestamp with time zone, p_recheck_seconds double precision, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_session_gone(p_attempt_id bigint, p_asked_at timestamp with time zone, p_recheck_seconds double precision, p_lock_token bigint) TO mdame_app;

-- The attempt's insert reservation stays spent: committed under a key of its own, so that the
-- publication's key is free for the reservation of its next session.
CREATE OR REPLACE FUNCTION mdame._keep_upload_charge(p_pub mdame.publications, p_attempt_id bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._keep_upload_charge(p_pub mdame.publications, p_attempt_id bigint) FROM PUBLIC, mdame_app, mdame_admin;
