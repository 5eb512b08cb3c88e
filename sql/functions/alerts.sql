-- Operator alerts: counted once per dimension, cause and day, delivered under a claim.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE OR REPLACE FUNCTION mdame._require_alert_lease(p_lease_s integer)
 RETURNS integer
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
  IF p_lease_s IS NULL OR p_lease_s NOT BETWEEN 1 AND 3600 THEN
    PERFORM mdame._invalid('lease_s must be between 1 and 3600 seconds');
  END IF;
  RETURN p_lease_s;
END
$function$;
REVOKE ALL ON FUNCTION mdame._require_alert_lease(p_lease_s integer) FROM PUBLIC, mdame_app, mdame_admin;

-- Records an alert once per dimension, cause and day (counting repeats) and says whether the
-- caller should deliver it now, with the claim's token to settle it with (NULL: not `deliver`).
-- A dimension's alert is fenced by its pipeline lock (p_lock_token): the stage that met the
-- cause holds it, and so no holder can record (and so silence for the day) another dimension's
-- alert. Raised without a token, for what no lock is held for: an alert of no dimension (the
-- disk), a run_failure (the run failure sensor, after the run ended) and a check_blocked (asset
-- checks, read-only steps that take no lock).
CREATE OR REPLACE FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date, p_text text, p_lease_s integer DEFAULT 120, p_lock_token bigint DEFAULT NULL::bigint)
 RETURNS TABLE(alert_id bigint, fresh boolean, deliver boolean, claim_token uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
  IF p_lock_token IS NOT NULL AND v_slug <> '' THEN
    PERFORM mdame._fence(mdame._dimension_id(v_slug), p_lock_token);
  ELSIF p_lock_token IS NOT NULL THEN
    PERFORM mdame._fence_token(p_lock_token);
  ELSIF v_slug <> '' AND p_cause NOT IN ('run_failure', 'check_blocked') THEN
    RAISE EXCEPTION USING ERRCODE = 'MD007',
      MESSAGE = format('mdame: fenced: a %s alert of dimension %s needs its pipeline lock token '
                       '(got NULL)', p_cause, v_slug);
  END IF;
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
$function$;
REVOKE ALL ON FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date, p_text text, p_lease_s integer, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date, p_text text, p_lease_s integer, p_lock_token bigint) TO mdame_app;

-- The alert went out: never delivered again. True the first time, false when it already was
-- delivered; MD004 while another deliverer holds it (this token's claim was taken over).
CREATE OR REPLACE FUNCTION mdame.mark_alert_delivered(p_alert_id bigint, p_claim_token uuid)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.mark_alert_delivered(p_alert_id bigint, p_claim_token uuid) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.mark_alert_delivered(p_alert_id bigint, p_claim_token uuid) TO mdame_app;

-- A delivery failed: counted, its reason kept, and the claim dropped so the sweep retries it.
-- Returns the attempts so far. MD003 once delivered; MD004 when the claim is no longer this
-- token's (another deliverer's claim is left as it is).
CREATE OR REPLACE FUNCTION mdame.mark_alert_failed(p_alert_id bigint, p_error text, p_claim_token uuid)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.mark_alert_failed(p_alert_id bigint, p_error text, p_claim_token uuid) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.mark_alert_failed(p_alert_id bigint, p_error text, p_claim_token uuid) TO mdame_app;

-- The sweep: up to p_limit undelivered alerts of the last p_max_age_days days that nobody holds,
-- oldest first, each claimed for p_lease_s seconds, with each claim's token.
CREATE OR REPLACE FUNCTION mdame.claim_undelivered_alerts(p_limit integer, p_lease_s integer DEFAULT 120, p_max_age_days integer DEFAULT 7)
 RETURNS TABLE(alert_id bigint, dimension_slug text, cause text, day date, text text, attempts integer, claim_token uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.claim_undelivered_alerts(p_limit integer, p_lease_s integer, p_max_age_days integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.claim_undelivered_alerts(p_limit integer, p_lease_s integer, p_max_age_days integer) TO mdame_app;

-- Raises MD004 saying why p_token no longer holds the alert's claim (never naming a token: a
-- claim token is a bearer, and messages reach logs).
CREATE OR REPLACE FUNCTION mdame._alert_claim_lost(p_alert mdame.alerts, p_token uuid)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD004',
    MESSAGE = format('mdame: alert %s is not claimed with this token (%s)', p_alert.id,
                     CASE WHEN p_alert.claim_token IS NULL THEN 'its claim was released'
                          ELSE format('another deliverer claimed it, until %s',
                                      p_alert.claimed_until) END);
END
$function$;
REVOKE ALL ON FUNCTION mdame._alert_claim_lost(p_alert mdame.alerts, p_token uuid) FROM PUBLIC, mdame_app, mdame_admin;

-- The alert row a holder settles, locked; MD001 for NULLs, MD006 when there is none.
CREATE OR REPLACE FUNCTION mdame._claimed_alert(p_alert_id bigint, p_token uuid)
 RETURNS mdame.alerts
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._claimed_alert(p_alert_id bigint, p_token uuid) FROM PUBLIC, mdame_app, mdame_admin;

-- Extends the claim by p_lease_s seconds from now while it is still this token's (even just
-- after it lapsed, as long as nobody took it over). Returns the new claimed_until; MD003 once
-- delivered, MD004 when another deliverer holds it or it was released.
CREATE OR REPLACE FUNCTION mdame.renew_alert_claim(p_alert_id bigint, p_claim_token uuid, p_lease_s integer DEFAULT 120)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame.renew_alert_claim(p_alert_id bigint, p_claim_token uuid, p_lease_s integer) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.renew_alert_claim(p_alert_id bigint, p_claim_token uuid, p_lease_s integer) TO mdame_app;
