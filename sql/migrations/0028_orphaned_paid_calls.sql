-- 0028: a paid call whose holder died is settled even when nobody asks for its work again.
--
-- begin_paid_call settles a dead holder's attempt at its estimate when the same work key is
-- asked again. When the next run takes another path (the voice chain's first provider answers
-- this time, the day's trends changed), nobody does, and the reservation would be held for good.
-- The recovery pass at the start of each run settles, the same way, every paid call of its
-- dimension still 'submitted' or 'unknown' whose lease has run out. The caller holds the
-- dimension's lock, so every other holder of the dimension's paid calls is gone.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE FUNCTION mdame.settle_orphaned_paid_calls(p_dimension_slug text, p_lock_token bigint)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_attempt provider_attempts;
  v_count integer := 0;
BEGIN
  PERFORM mdame._fence(mdame._dimension_id(p_dimension_slug), p_lock_token);
  FOR v_attempt IN
    SELECT * FROM provider_attempts
     WHERE detail ? 'budget_key' AND detail ->> 'dimension' = p_dimension_slug
       AND status IN ('submitted', 'unknown')
       AND coalesce(lease_expires_at, '-infinity') <= now()
     ORDER BY id
     FOR UPDATE
  LOOP
    PERFORM mdame._settle_at_estimate(v_attempt);
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

GRANT EXECUTE ON FUNCTION mdame.settle_orphaned_paid_calls(text, bigint) TO mdame_app;
