-- 0012: exactly-once YouTube publishing (issue 9).
--
-- Quota, the June-2026 model. videos.insert and search.list each have a bucket of calls a day,
-- everything else a bucket of units (quota_ledger.bucket; the units bucket keeps the old cap
-- column daily_quota_units). Days are the account's quota day (Pacific for YouTube), as in 0003.
-- An account refused by the channel is paused: quotaExceeded until its next quota day,
-- uploadLimitExceeded for 24 hours; a revoked grant marks it needs_reauth (an alert event).
-- Neither gets a new upload until that ends (begin_upload answers 'skipped').
--
-- Resumable uploads. The session URI, with the file's SHA-256 and size, is committed
-- (open_upload_session) before the first byte is sent, so every later run can ask the session
-- where it stands. resume_upload hands an unsettled upload (and its session) to the live lock
-- holder, once the submitting holder's lease has run out; the new holder resumes the transfer
-- or settles it through reconcile_upload (0005).
--
-- Channel credentials: only ciphertext (an AES-256-GCM envelope made by the client) is stored.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- =============================================================================================
-- Accounts: per-bucket caps, pauses, re-authorisation.
-- =============================================================================================
ALTER TABLE dimension_accounts
  ADD COLUMN daily_insert_calls integer NOT NULL DEFAULT 100 CHECK (daily_insert_calls >= 0),
  ADD COLUMN daily_search_calls integer NOT NULL DEFAULT 100 CHECK (daily_search_calls >= 0),
  ADD COLUMN paused_until timestamptz,
  ADD COLUMN pause_reason text CHECK (length(pause_reason) <= 200),
  ADD COLUMN needs_reauth boolean NOT NULL DEFAULT false;

ALTER TABLE quota_ledger
  ADD COLUMN bucket text NOT NULL DEFAULT 'units'
  CONSTRAINT quota_ledger_bucket_check CHECK (bucket IN ('insert', 'search', 'units'));
DROP INDEX quota_ledger_account_day_idx;
CREATE INDEX quota_ledger_account_day_idx ON quota_ledger (account_id, day, bucket);

-- The units bucket, as before (its cap is daily_quota_units).
CREATE OR REPLACE VIEW quota_usage WITH (security_invoker = true) AS
SELECT l.account_id, l.day, a.daily_quota_units AS cap_units,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'reserved'), 0)::bigint AS reserved_units,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'committed'), 0)::bigint AS committed_units
FROM quota_ledger l
JOIN dimension_accounts a ON a.id = l.account_id
WHERE l.bucket = 'units'
GROUP BY l.account_id, l.day, a.daily_quota_units;

CREATE VIEW quota_bucket_usage WITH (security_invoker = true) AS
SELECT l.account_id, l.day, l.bucket,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'reserved'), 0)::bigint AS reserved_units,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'committed'), 0)::bigint AS committed_units
FROM quota_ledger l
GROUP BY l.account_id, l.day, l.bucket;
GRANT SELECT ON quota_usage, quota_bucket_usage TO mdame_app;

CREATE FUNCTION mdame._bucket_cap(p_account dimension_accounts, p_bucket text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_bucket WHEN 'insert' THEN p_account.daily_insert_calls
                       WHEN 'search' THEN p_account.daily_search_calls
                       ELSE p_account.daily_quota_units END
$$;

-- 0003's reserve_quota, per bucket. Returns the ledger id, or NULL when it does not fit.
CREATE FUNCTION mdame._reserve_quota(p_account_id bigint, p_bucket text, p_units integer,
                                     p_quota_key text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_account dimension_accounts;
  v_day date;
  v_used bigint;
  v_entry quota_ledger;
BEGIN
  PERFORM mdame._require_not_null('account_id', p_account_id),
          mdame._require_one_of('bucket', p_bucket, ARRAY['insert', 'search', 'units']),
          mdame._require_range('units', p_units, 1, 2147483647),
          mdame._require_text('quota_key', p_quota_key);
  SELECT * INTO v_account FROM dimension_accounts WHERE id = p_account_id FOR NO KEY UPDATE;
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  v_day := mdame._quota_day(v_account.quota_timezone);
  SELECT * INTO v_entry FROM quota_ledger WHERE quota_key = p_quota_key FOR UPDATE;
  IF v_entry.id IS NOT NULL THEN
    IF (v_entry.account_id, v_entry.units, v_entry.bucket)
       IS DISTINCT FROM (p_account_id, p_units, p_bucket) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD002',
        MESSAGE = format('mdame: quota_key %s was reserved for account %s, %s %s units',
                         mdame._clip(p_quota_key), v_entry.account_id, v_entry.units,
                         v_entry.bucket);
    ELSIF v_entry.state <> 'released' THEN
      RETURN v_entry.id;
    END IF;
  END IF;
  SELECT coalesce(sum(units) FILTER (WHERE state <> 'released'), 0) INTO v_used
    FROM quota_ledger WHERE account_id = p_account_id AND day = v_day AND bucket = p_bucket;
  IF v_used + p_units > mdame._bucket_cap(v_account, p_bucket) THEN
    RETURN NULL;
  END IF;
  IF v_entry.id IS NOT NULL THEN
    UPDATE quota_ledger SET state = 'reserved', day = v_day, updated_at = now()
     WHERE id = v_entry.id;
    RETURN v_entry.id;
  END IF;
  INSERT INTO quota_ledger (account_id, day, quota_key, units, bucket)
  VALUES (p_account_id, v_day, p_quota_key, p_units, p_bucket)
  RETURNING id INTO v_entry.id;
  RETURN v_entry.id;
END
$$;

CREATE OR REPLACE FUNCTION mdame.reserve_quota(p_account_id bigint, p_units integer,
                                               p_quota_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  RETURN mdame._reserve_quota(p_account_id, 'units', p_units, p_quota_key);
END
$$;

-- Reserves units of one bucket ('insert', 'search' or 'units') of the account's quota day.
CREATE FUNCTION mdame.reserve_bucket_quota(p_account_id bigint, p_bucket text, p_units integer,
                                           p_quota_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  RETURN mdame._reserve_quota(p_account_id, p_bucket, p_units, p_quota_key);
END
$$;

-- Why an account may not start an upload now (NULL: it may).
CREATE FUNCTION mdame._account_blocked(p_account_id bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN a.needs_reauth THEN 'needs_reauth'
              WHEN a.paused_until > now() THEN coalesce(a.pause_reason, 'paused')
         END
    FROM mdame.dimension_accounts a WHERE a.id = p_account_id
$$;

-- Pauses an account the channel refused: 'quotaExceeded' until its next quota day begins,
-- 'uploadLimitExceeded' for 24 hours. Returns the end of the pause.
CREATE FUNCTION mdame.pause_account(p_account_id bigint, p_reason text, p_lock_token bigint)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_account dimension_accounts;
  v_until timestamptz;
BEGIN
  PERFORM mdame._require_one_of('reason', p_reason,
                                ARRAY['quotaExceeded', 'uploadLimitExceeded']);
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
$$;

-- A revoked or expired grant: no publishing to the account until it is connected again, and an
-- alert event. Returns true when this call marked it.
CREATE FUNCTION mdame.mark_needs_reauth(p_account_id bigint, p_reason text, p_lock_token bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
$$;

-- =============================================================================================
-- Channel credentials: ciphertext only.
-- =============================================================================================
CREATE TABLE account_credentials (
  account_id  bigint PRIMARY KEY REFERENCES dimension_accounts (id),
  key_id      text NOT NULL CHECK (key_id ~ '^[0-9a-f]{16}$'),
  wrapped_key bytea NOT NULL CHECK (length(wrapped_key) BETWEEN 40 AND 200),
  ciphertext  bytea NOT NULL CHECK (length(ciphertext) BETWEEN 29 AND 20000),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE account_credentials ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON account_credentials FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON account_credentials TO mdame_app;

-- Stores an account's encrypted grant (replacing any earlier one) and clears needs_reauth.
CREATE FUNCTION mdame.store_account_credential(p_account_id bigint, p_key_id text,
                                               p_wrapped_key bytea, p_ciphertext bytea)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_not_null('account_id', p_account_id),
          mdame._require_match('key_id', p_key_id, '^[0-9a-f]{16}$'),
          mdame._require_not_null('wrapped_key', p_wrapped_key),
          mdame._require_not_null('ciphertext', p_ciphertext);
  IF length(p_wrapped_key) NOT BETWEEN 40 AND 200 OR length(p_ciphertext) NOT BETWEEN 29 AND 20000
  THEN
    PERFORM mdame._invalid('wrapped_key/ciphertext do not look like AES-GCM envelopes');
  END IF;
  IF NOT EXISTS (SELECT FROM dimension_accounts WHERE id = p_account_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  INSERT INTO account_credentials (account_id, key_id, wrapped_key, ciphertext)
  VALUES (p_account_id, p_key_id, p_wrapped_key, p_ciphertext)
  ON CONFLICT (account_id) DO UPDATE
    SET key_id = EXCLUDED.key_id, wrapped_key = EXCLUDED.wrapped_key,
        ciphertext = EXCLUDED.ciphertext, updated_at = now();
  UPDATE dimension_accounts SET needs_reauth = false, updated_at = now() WHERE id = p_account_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('account', p_account_id, 'credential_stored', jsonb_build_object('key_id', p_key_id));
  RETURN p_account_id;
END
$$;

-- Key rotation: every data key wrapped by p_old_key_id is re-wrapped, all or none. p_items:
-- [{"account_id": n, "wrapped_key": base64}] covering every such account. Returns the count.
CREATE FUNCTION mdame.rewrap_account_credentials(p_old_key_id text, p_new_key_id text,
                                                 p_items jsonb)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_item jsonb;
  v_count integer := 0;
  v_expected integer;
BEGIN
  PERFORM mdame._require_match('old_key_id', p_old_key_id, '^[0-9a-f]{16}$'),
          mdame._require_match('new_key_id', p_new_key_id, '^[0-9a-f]{16}$'),
          mdame._require_json('items', p_items, 'array');
  SELECT count(*) INTO v_expected FROM account_credentials WHERE key_id = p_old_key_id;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF coalesce(length(decode(v_item ->> 'wrapped_key', 'base64')), 0) NOT BETWEEN 40 AND 200 THEN
      PERFORM mdame._invalid(format('the wrapped key of account %s is not an AES-GCM envelope',
                                    mdame._clip(v_item ->> 'account_id')));
    END IF;
    UPDATE account_credentials
       SET key_id = p_new_key_id, wrapped_key = decode(v_item ->> 'wrapped_key', 'base64'),
           updated_at = now()
     WHERE account_id = (v_item ->> 'account_id')::bigint AND key_id = p_old_key_id;
    IF NOT FOUND THEN
      PERFORM mdame._invalid(format('account %s has no data key wrapped by %s',
                                    mdame._clip(v_item ->> 'account_id'), p_old_key_id));
    END IF;
    v_count := v_count + 1;
  END LOOP;
  IF v_count <> v_expected THEN
    PERFORM mdame._invalid(format('%s data keys are wrapped by %s, %s were re-wrapped',
                                  v_expected, p_old_key_id, v_count));
  END IF;
  RETURN v_count;
EXCEPTION
  WHEN invalid_text_representation OR invalid_parameter_value OR numeric_value_out_of_range THEN
    PERFORM mdame._invalid('items need integer account_id and base64 wrapped_key');
    RETURN NULL;
END
$$;

-- =============================================================================================
-- Publishing with buckets, skips and resumable sessions.
-- =============================================================================================
-- 0005's begin_upload with the quota bucket, and 'skipped' (publication_id, 'skipped', NULL)
-- for an account that may not start an upload now (paused, or needs_reauth).
CREATE FUNCTION mdame._begin_upload(p_idempotency_key text, p_payload jsonb, p_bucket text,
                                    p_units integer, p_provider text, p_required_reviews text[],
                                    p_grace_seconds integer, p_lock_token bigint)
RETURNS TABLE (publication_id bigint, action text, attempt_id bigint)
LANGUAGE plpgsql AS $$
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
$$;

CREATE OR REPLACE FUNCTION mdame.begin_upload(p_idempotency_key text, p_payload jsonb,
                                              p_units integer, p_provider text,
                                              p_required_reviews text[], p_grace_seconds integer,
                                              p_lock_token bigint)
RETURNS TABLE (publication_id bigint, action text, attempt_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  RETURN QUERY SELECT * FROM mdame._begin_upload(p_idempotency_key, p_payload, 'units', p_units,
                                                 p_provider, p_required_reviews, p_grace_seconds,
                                                 p_lock_token);
END
$$;

-- begin_upload charged to a bucket (YouTube: 'insert', 1 call).
CREATE FUNCTION mdame.begin_bucket_upload(p_idempotency_key text, p_payload jsonb,
                                          p_bucket text, p_units integer, p_provider text,
                                          p_required_reviews text[], p_grace_seconds integer,
                                          p_lock_token bigint)
RETURNS TABLE (publication_id bigint, action text, attempt_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  RETURN QUERY SELECT * FROM mdame._begin_upload(p_idempotency_key, p_payload, p_bucket, p_units,
                                                 p_provider, p_required_reviews, p_grace_seconds,
                                                 p_lock_token);
END
$$;

CREATE TABLE upload_sessions (
  attempt_id     bigint PRIMARY KEY REFERENCES provider_attempts (id),
  publication_id bigint NOT NULL REFERENCES publications (id),
  session_uri    text NOT NULL CHECK (session_uri ~ '^https?://' AND length(session_uri) <= 4000),
  content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
  size_bytes     bigint NOT NULL CHECK (size_bytes > 0),
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upload_sessions_publication_idx ON upload_sessions (publication_id);
ALTER TABLE upload_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON upload_sessions FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON upload_sessions TO mdame_app;

-- The attempt this holder submits (its own, 'submitted') and its publication, locked.
CREATE FUNCTION mdame._own_upload(p_attempt_id bigint, p_lock_token bigint)
RETURNS mdame.publications
LANGUAGE plpgsql AS $$
DECLARE
  v_pub mdame.publications := mdame._attempt_publication(p_attempt_id);
  v_attempt mdame.provider_attempts;
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('publication', v_pub.id), p_lock_token);
  SELECT * INTO v_attempt FROM mdame.provider_attempts WHERE id = p_attempt_id;
  IF v_attempt.status <> 'submitted' OR v_attempt.lock_token IS DISTINCT FROM p_lock_token
     OR v_pub.state <> 'uploading' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: attempt %s is %s under token %s and its publication %s: not '
                       'this holder''s upload in flight', p_attempt_id, v_attempt.status,
                       v_attempt.lock_token, v_pub.state);
  END IF;
  RETURN v_pub;
END
$$;

-- The recovery point before the first byte: the session, the file's SHA-256 and size. Repeating
-- the same values is a no-op; another session for the same attempt is refused (MD002).
CREATE FUNCTION mdame.open_upload_session(p_attempt_id bigint, p_session_uri text,
                                          p_content_sha256 text, p_size_bytes bigint,
                                          p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
  v_old upload_sessions;
BEGIN
  PERFORM mdame._require_match('session_uri', p_session_uri, '^https?://'),
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

-- Hands the publication's unsettled upload to this holder: allowed for its own attempt, or for
-- another holder's once that holder's lease ran out (it has stopped sending by then). The
-- attempt is 'submitted' again under this token and lease. Returns the attempt and its session
-- (NULL columns when none was committed: then no byte was sent).
CREATE FUNCTION mdame.resume_upload(p_publication_id bigint, p_lock_token bigint)
RETURNS TABLE (attempt_id bigint, session_uri text, content_sha256 text, size_bytes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
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
  PERFORM mdame._require_attempt_holder(v_attempt.id, p_lock_token, now());
  UPDATE provider_attempts
     SET lock_token = p_lock_token, status = 'submitted',
         lease_expires_at = v_lock.expires_at
                            + coalesce(lease_grace_seconds, 0) * interval '1 second',
         detail = detail || jsonb_build_object('resumed_from', v_attempt.lock_token),
         updated_at = now()
   WHERE id = v_attempt.id;
  RETURN QUERY SELECT v_attempt.id, s.session_uri, s.content_sha256, s.size_bytes
                 FROM (SELECT 1) one
                 LEFT JOIN upload_sessions s ON s.attempt_id = v_attempt.id;
END
$$;

-- What the channel says about a published video's processing; a failure is also an alert.
CREATE FUNCTION mdame.record_video_processing(p_publication_id bigint, p_status text,
                                              p_detail jsonb, p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
BEGIN
  PERFORM mdame._require_one_of('status', p_status,
                                ARRAY['processing', 'succeeded', 'failed', 'terminated']),
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
          CASE WHEN p_status IN ('failed', 'terminated') THEN 'alert' ELSE 'processing' END,
          p_detail || jsonb_build_object('processing', p_status,
                                         'video_id', v_pub.result ->> 'video_id'));
  RETURN p_status;
END
$$;

REVOKE ALL ON FUNCTION
  mdame._bucket_cap(dimension_accounts, text),
  mdame._reserve_quota(bigint, text, integer, text),
  mdame._account_blocked(bigint),
  mdame._begin_upload(text, jsonb, text, integer, text, text[], integer, bigint),
  mdame._own_upload(bigint, bigint)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.reserve_bucket_quota(bigint, text, integer, text),
  mdame.pause_account(bigint, text, bigint),
  mdame.mark_needs_reauth(bigint, text, bigint),
  mdame.store_account_credential(bigint, text, bytea, bytea),
  mdame.rewrap_account_credentials(text, text, jsonb),
  mdame.begin_bucket_upload(text, jsonb, text, integer, text, text[], integer, bigint),
  mdame.open_upload_session(bigint, text, text, bigint, bigint),
  mdame.resume_upload(bigint, bigint),
  mdame.record_video_processing(bigint, text, jsonb, bigint)
TO mdame_app;
