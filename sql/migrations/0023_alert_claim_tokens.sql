-- 0023: an alert's delivery claim carries a token, and only its holder may settle it.
--
-- Every claim (record_alert's for the raiser, claim_undelivered_alerts' for a sweep) draws a
-- fresh claim_token beside claimed_until and hands it to the claimant. mark_alert_delivered and
-- mark_alert_failed take the token and act only while it is still the row's token
-- (compare-and-set). A deliverer that was slow, whose claim lapsed and was taken over, gets MD004
-- and changes nothing: it can no longer clear the new holder's claim and let a third deliverer
-- send the alert again. A lapsed claim nobody took over is still its holder's, as a lock's
-- heartbeat is. renew_alert_claim lets a sweep check, and extend, its claim right before it
-- sends, so a claim that lapsed while earlier alerts of the batch were sent is not sent twice.
--
-- Claims taken before this migration have no token: they lapse, and the sweep claims them again.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

ALTER TABLE alerts ADD COLUMN claim_token uuid;  -- the current claim's; NULL: nobody holds it

-- Raises MD004 saying why p_token no longer holds the alert's claim.
CREATE FUNCTION mdame._alert_claim_lost(p_alert mdame.alerts, p_token uuid) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: alert %s is not claimed with token %s (%s)', p_alert.id, p_token,
                     CASE WHEN p_alert.claim_token IS NULL THEN 'its claim was released'
                          ELSE format('another deliverer claimed it, until %s',
                                      p_alert.claimed_until) END);
END
$$;

-- The alert row a holder settles, locked; MD001 for NULLs, MD006 when there is none.
CREATE FUNCTION mdame._claimed_alert(p_alert_id bigint, p_token uuid) RETURNS mdame.alerts
LANGUAGE plpgsql AS $$
DECLARE
  v_alert mdame.alerts;
BEGIN
  IF p_alert_id IS NULL THEN
    PERFORM mdame._invalid('alert_id must not be NULL');
  END IF;
  IF p_token IS NULL THEN
    PERFORM mdame._invalid('claim_token must not be NULL');
  END IF;
  SELECT * INTO v_alert FROM mdame.alerts WHERE id = p_alert_id FOR UPDATE;
  IF v_alert.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: no alert %s', p_alert_id);
  END IF;
  RETURN v_alert;
END
$$;

DROP FUNCTION mdame.record_alert(text, text, date, text, integer);
DROP FUNCTION mdame.mark_alert_delivered(bigint);
DROP FUNCTION mdame.mark_alert_failed(bigint, text);
DROP FUNCTION mdame.claim_undelivered_alerts(integer, integer, integer);

-- As in 0019, plus the claim's token for the caller to settle it with (NULL: not `deliver`).
CREATE FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date, p_text text,
                                   p_lease_s integer DEFAULT 120)
RETURNS TABLE (alert_id bigint, fresh boolean, deliver boolean, claim_token uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_slug text := coalesce(p_dimension_slug, '');
  v_id bigint;
  v_fresh boolean;
  v_token uuid;
BEGIN
  IF v_slug <> '' THEN
    PERFORM mdame._require_match('dimension_slug', v_slug, '^[a-z][a-z0-9_-]{1,39}$');
  END IF;
  IF p_cause IS NULL OR p_cause NOT IN ('run_failure', 'halt', 'reauth_needed', 'budget_cap',
                                        'quota_exhausted', 'check_blocked', 'disk_low',
                                        'provider_refused') THEN
    PERFORM mdame._invalid(format('unknown alert cause %s', coalesce(p_cause, 'NULL')));
  END IF;
  IF p_day IS NULL THEN
    PERFORM mdame._invalid('day must not be NULL');
  END IF;
  PERFORM mdame._require_text('text', p_text, 20000), mdame._require_alert_lease(p_lease_s);
  INSERT INTO alerts AS a (dimension_slug, cause, day, text, claimed_until, claim_token)
  VALUES (v_slug, p_cause, p_day, p_text, now() + make_interval(secs => p_lease_s),
          gen_random_uuid())
  ON CONFLICT (dimension_slug, cause, day) DO UPDATE
    SET occurrences = a.occurrences + 1, last_seen_at = now()
  RETURNING a.id, (a.xmax = 0), a.claim_token INTO v_id, v_fresh, v_token;
  IF v_fresh THEN
    RETURN QUERY SELECT v_id, true, true, v_token;
    RETURN;
  END IF;
  v_token := NULL;
  UPDATE alerts a SET claimed_until = now() + make_interval(secs => p_lease_s),
                      claim_token = gen_random_uuid()
   WHERE a.id = v_id AND a.delivered_at IS NULL AND a.attempts > 0
     AND (a.claimed_until IS NULL OR a.claimed_until < now())
  RETURNING a.claim_token INTO v_token;
  RETURN QUERY SELECT v_id, false, v_token IS NOT NULL, v_token;
END
$$;

-- The alert went out: never delivered again. True the first time, false when it already was
-- delivered; MD004 while another deliverer holds it (this token's claim was taken over).
CREATE FUNCTION mdame.mark_alert_delivered(p_alert_id bigint, p_claim_token uuid)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_alert alerts := mdame._claimed_alert(p_alert_id, p_claim_token);
BEGIN
  IF v_alert.delivered_at IS NOT NULL THEN
    RETURN false;
  END IF;
  IF v_alert.claim_token IS DISTINCT FROM p_claim_token THEN
    PERFORM mdame._alert_claim_lost(v_alert, p_claim_token);
  END IF;
  UPDATE alerts SET delivered_at = now(), claimed_until = NULL, claim_token = NULL,
                    attempts = attempts + 1
   WHERE id = p_alert_id;
  RETURN true;
END
$$;

-- A delivery failed: counted, its reason kept, and the claim dropped so the sweep retries it.
-- Returns the attempts so far. MD003 once delivered; MD004 when the claim is no longer this
-- token's (another deliverer's claim is left as it is).
CREATE FUNCTION mdame.mark_alert_failed(p_alert_id bigint, p_error text, p_claim_token uuid)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_error text := left(mdame._require_text('error', p_error, 100000), 2000);
  v_alert alerts := mdame._claimed_alert(p_alert_id, p_claim_token);
  v_attempts integer;
BEGIN
  IF v_alert.delivered_at IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: alert %s was already delivered', p_alert_id);
  END IF;
  IF v_alert.claim_token IS DISTINCT FROM p_claim_token THEN
    PERFORM mdame._alert_claim_lost(v_alert, p_claim_token);
  END IF;
  UPDATE alerts
     SET attempts = attempts + 1, claimed_until = NULL, claim_token = NULL, last_error = v_error
   WHERE id = p_alert_id
  RETURNING attempts INTO v_attempts;
  RETURN v_attempts;
END
$$;

-- Extends the claim by p_lease_s seconds from now while it is still this token's (even just
-- after it lapsed, as long as nobody took it over). Returns the new claimed_until; MD003 once
-- delivered, MD004 when another deliverer holds it or it was released.
CREATE FUNCTION mdame.renew_alert_claim(p_alert_id bigint, p_claim_token uuid,
                                        p_lease_s integer DEFAULT 120)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_lease integer := mdame._require_alert_lease(p_lease_s);
  v_alert alerts := mdame._claimed_alert(p_alert_id, p_claim_token);
  v_until timestamptz;
BEGIN
  IF v_alert.delivered_at IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: alert %s was already delivered', p_alert_id);
  END IF;
  IF v_alert.claim_token IS DISTINCT FROM p_claim_token THEN
    PERFORM mdame._alert_claim_lost(v_alert, p_claim_token);
  END IF;
  UPDATE alerts SET claimed_until = now() + make_interval(secs => v_lease)
   WHERE id = p_alert_id
  RETURNING claimed_until INTO v_until;
  RETURN v_until;
END
$$;

-- As in 0015, plus each claim's token.
CREATE FUNCTION mdame.claim_undelivered_alerts(p_limit integer, p_lease_s integer DEFAULT 120,
                                               p_max_age_days integer DEFAULT 7)
RETURNS TABLE (alert_id bigint, dimension_slug text, cause text, day date, text text,
               attempts integer, claim_token uuid)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000 THEN
    PERFORM mdame._invalid('limit must be between 1 and 1000');
  END IF;
  IF p_max_age_days IS NULL OR p_max_age_days NOT BETWEEN 1 AND 366 THEN
    PERFORM mdame._invalid('max_age_days must be between 1 and 366');
  END IF;
  PERFORM mdame._require_alert_lease(p_lease_s);
  RETURN QUERY
  WITH due AS (
    SELECT a.id FROM alerts a
     WHERE a.delivered_at IS NULL
       AND (a.claimed_until IS NULL OR a.claimed_until < now())
       AND a.created_at > now() - make_interval(days => p_max_age_days)
     ORDER BY a.created_at, a.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED
  )
  UPDATE alerts a SET claimed_until = now() + make_interval(secs => p_lease_s),
                      claim_token = gen_random_uuid()
    FROM due WHERE a.id = due.id
  RETURNING a.id, a.dimension_slug, a.cause, a.day, a.text, a.attempts, a.claim_token;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA mdame FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.record_alert(text, text, date, text, integer),
  mdame.mark_alert_delivered(bigint, uuid),
  mdame.mark_alert_failed(bigint, text, uuid),
  mdame.renew_alert_claim(bigint, uuid, integer),
  mdame.claim_undelivered_alerts(integer, integer, integer)
TO mdame_app;
