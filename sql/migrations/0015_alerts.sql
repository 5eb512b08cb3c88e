-- 0015: operator alerts (issue 12, slice "ops-alerts").
--
-- One row per dimension, cause and UTC day: the first occurrence is delivered (Telegram, or the
-- outbox offline), later ones that day only count. Delivery happens after the row committed,
-- so an alert is never lost to a notifier outage: a row without delivered_at is claimed again
-- by the sweep (claim_undelivered_alerts, with a short lease so two sweepers never send the
-- same alert at once) until it is delivered.
--
-- Not fenced: alerts come from sensors (run failures) as well as from partition steps, and a
-- dimension's alert row is shared by all of its runs of the day. The stored text names the
-- dimension, the cause and a short reason; callers never put a secret in it.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE TABLE mdame.alerts (
  id             bigserial PRIMARY KEY,
  -- '' for an alert of no dimension (the global chat).
  dimension_slug text NOT NULL CHECK (dimension_slug = '' OR dimension_slug ~ '^[a-z][a-z0-9_-]{1,39}$'),
  cause          text NOT NULL CHECK (cause IN ('run_failure', 'halt', 'reauth_needed', 'budget_cap',
                                                'quota_exhausted', 'check_blocked', 'disk_low')),
  day            date NOT NULL,  -- the UTC day the cause was first seen: the dedup window
  text           text NOT NULL CHECK (length(text) BETWEEN 1 AND 20000),
  occurrences    integer NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
  attempts       integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),  -- delivery attempts
  last_error     text CHECK (length(last_error) <= 2000),
  claimed_until  timestamptz,  -- a deliverer's lease
  delivered_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  last_seen_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (dimension_slug, cause, day)
);
CREATE INDEX alerts_undelivered ON mdame.alerts (created_at) WHERE delivered_at IS NULL;
GRANT SELECT ON mdame.alerts TO mdame_app;
ALTER TABLE mdame.alerts ENABLE ROW LEVEL SECURITY;
CREATE POLICY app_reads ON mdame.alerts FOR SELECT TO mdame_app USING (true);

CREATE FUNCTION mdame._require_alert_lease(p_lease_s integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_lease_s IS NULL OR p_lease_s NOT BETWEEN 1 AND 3600 THEN
    PERFORM mdame._invalid('lease_s must be between 1 and 3600 seconds');
  END IF;
  RETURN p_lease_s;
END
$$;

-- Records one occurrence of a cause. A new row (`fresh`) is claimed for the caller to deliver
-- (`deliver`); a repeat the same day only counts, and is handed over for delivery only when
-- its first delivery failed and nobody holds it now (so an outage's alerts still go out).
CREATE FUNCTION mdame.record_alert(p_dimension_slug text, p_cause text, p_day date, p_text text,
                                   p_lease_s integer DEFAULT 120)
RETURNS TABLE (alert_id bigint, fresh boolean, deliver boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_slug text := coalesce(p_dimension_slug, '');
  v_id bigint;
  v_fresh boolean;
  v_claimed integer;
BEGIN
  IF v_slug <> '' THEN
    PERFORM mdame._require_match('dimension_slug', v_slug, '^[a-z][a-z0-9_-]{1,39}$');
  END IF;
  IF p_cause IS NULL OR p_cause NOT IN ('run_failure', 'halt', 'reauth_needed', 'budget_cap',
                                        'quota_exhausted', 'check_blocked', 'disk_low') THEN
    PERFORM mdame._invalid(format('unknown alert cause %s', coalesce(p_cause, 'NULL')));
  END IF;
  IF p_day IS NULL THEN
    PERFORM mdame._invalid('day must not be NULL');
  END IF;
  PERFORM mdame._require_text('text', p_text, 20000), mdame._require_alert_lease(p_lease_s);
  INSERT INTO alerts AS a (dimension_slug, cause, day, text, claimed_until)
  VALUES (v_slug, p_cause, p_day, p_text, now() + make_interval(secs => p_lease_s))
  ON CONFLICT (dimension_slug, cause, day) DO UPDATE
    SET occurrences = a.occurrences + 1, last_seen_at = now()
  RETURNING a.id, (a.xmax = 0) INTO v_id, v_fresh;
  IF v_fresh THEN
    RETURN QUERY SELECT v_id, true, true;
    RETURN;
  END IF;
  UPDATE alerts a SET claimed_until = now() + make_interval(secs => p_lease_s)
   WHERE a.id = v_id AND a.delivered_at IS NULL AND a.attempts > 0
     AND (a.claimed_until IS NULL OR a.claimed_until < now());
  GET DIAGNOSTICS v_claimed = ROW_COUNT;
  RETURN QUERY SELECT v_id, false, v_claimed > 0;
END
$$;

-- The alert went out: never delivered again. True the first time.
CREATE FUNCTION mdame.mark_alert_delivered(p_alert_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_done integer;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM alerts WHERE id = p_alert_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: no alert %s', p_alert_id);
  END IF;
  UPDATE alerts SET delivered_at = now(), claimed_until = NULL, attempts = attempts + 1
   WHERE id = p_alert_id AND delivered_at IS NULL;
  GET DIAGNOSTICS v_done = ROW_COUNT;
  RETURN v_done > 0;
END
$$;

-- A delivery failed: counted, its reason kept, and the claim dropped so the sweep retries it.
-- Returns the attempts so far.
CREATE FUNCTION mdame.mark_alert_failed(p_alert_id bigint, p_error text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_attempts integer;
BEGIN
  UPDATE alerts
     SET attempts = attempts + 1, claimed_until = NULL,
         last_error = left(mdame._require_text('error', p_error, 100000), 2000)
   WHERE id = p_alert_id AND delivered_at IS NULL
  RETURNING attempts INTO v_attempts;
  IF v_attempts IS NULL THEN
    IF NOT EXISTS (SELECT 1 FROM alerts WHERE id = p_alert_id) THEN
      RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: no alert %s', p_alert_id);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: alert %s was already delivered', p_alert_id);
  END IF;
  RETURN v_attempts;
END
$$;

-- The sweep: up to p_limit undelivered alerts of the last p_max_age_days days that nobody holds,
-- oldest first, each claimed for p_lease_s seconds.
CREATE FUNCTION mdame.claim_undelivered_alerts(p_limit integer, p_lease_s integer DEFAULT 120,
                                               p_max_age_days integer DEFAULT 7)
RETURNS TABLE (alert_id bigint, dimension_slug text, cause text, day date, text text,
               attempts integer)
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
  UPDATE alerts a SET claimed_until = now() + make_interval(secs => p_lease_s)
    FROM due WHERE a.id = due.id
  RETURNING a.id, a.dimension_slug, a.cause, a.day, a.text, a.attempts;
END
$$;

REVOKE ALL ON FUNCTION mdame._require_alert_lease(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.record_alert(text, text, date, text, integer),
  mdame.mark_alert_delivered(bigint),
  mdame.mark_alert_failed(bigint, text),
  mdame.claim_undelivered_alerts(integer, integer, integer)
TO mdame_app;
