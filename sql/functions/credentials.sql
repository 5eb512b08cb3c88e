-- Stored account credentials: grants sealed under a data key wrapped by the master key.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Stores an account's encrypted grant (replacing any earlier one) and clears needs_reauth, only
-- under the current master key (the first grant records it). A new grant has no copy under a
-- replaced key.
CREATE OR REPLACE FUNCTION mdame.store_account_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_keys master_keys;
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
  v_keys := mdame._master_keys();
  IF v_keys.current_key_id IS NULL THEN
    UPDATE master_keys SET current_key_id = p_key_id, updated_at = now();
  ELSIF v_keys.current_key_id <> p_key_id THEN
    PERFORM mdame._not_current_key(v_keys, p_key_id, 'the grant is sealed under');
  END IF;
  INSERT INTO account_credentials (account_id, key_id, wrapped_key, ciphertext)
  VALUES (p_account_id, p_key_id, p_wrapped_key, p_ciphertext)
  ON CONFLICT (account_id) DO UPDATE
    SET key_id = EXCLUDED.key_id, wrapped_key = EXCLUDED.wrapped_key,
        ciphertext = EXCLUDED.ciphertext, previous_key_id = NULL, previous_wrapped_key = NULL,
        updated_at = now();
  UPDATE dimension_accounts SET needs_reauth = false, updated_at = now() WHERE id = p_account_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('account', p_account_id, 'credential_stored', jsonb_build_object('key_id', p_key_id));
  RETURN p_account_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame.store_account_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.store_account_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea) TO mdame_admin;

-- Key rotation from p_old_key_id to p_new_key_id. p_items: [{"account_id": n, "key_id": the
-- key that wraps the data key the rotator read, "expected_wrapped_key": base64 of that wrapped
-- key, "wrapped_key": base64 of the same data key wrapped by the new key}]. The first pass
-- makes p_new_key_id current (refused unless p_old_key_id is current); a later pass of the same
-- rotation (p_new_key_id current, p_old_key_id previous) re-wraps what changed under the first.
-- A row is re-wrapped only if it still holds the expected key id and wrapped key. Returns the
-- grants still not under the new key (account_id, key_id): re-read them and pass them again.
CREATE OR REPLACE FUNCTION mdame.rewrap_account_credentials(p_old_key_id text, p_new_key_id text, p_items jsonb)
 RETURNS TABLE(account_id bigint, key_id text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
  v_keys master_keys;
  v_item jsonb;
  v_from text;
  v_expected bytea;
  v_wrapped bytea;
  v_found integer;
BEGIN
  PERFORM mdame._require_match('old_key_id', p_old_key_id, '^[0-9a-f]{16}$'),
          mdame._require_match('new_key_id', p_new_key_id, '^[0-9a-f]{16}$'),
          mdame._require_json('items', p_items, 'array');
  IF p_old_key_id = p_new_key_id THEN
    PERFORM mdame._invalid('old_key_id and new_key_id are the same key');
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF jsonb_typeof(v_item) <> 'object' THEN
      PERFORM mdame._invalid('each item must be an object');
    END IF;
    PERFORM mdame._require_match('item key_id', v_item ->> 'key_id', '^[0-9a-f]{16}$');
    IF coalesce(length(decode(v_item ->> 'wrapped_key', 'base64')), 0) NOT BETWEEN 40 AND 200
       OR coalesce(length(decode(v_item ->> 'expected_wrapped_key', 'base64')), 0)
          NOT BETWEEN 40 AND 200 THEN
      PERFORM mdame._invalid(format('the wrapped keys of account %s are not AES-GCM envelopes',
                                    mdame._clip(v_item ->> 'account_id')));
    END IF;
  END LOOP;
  v_keys := mdame._master_keys();
  IF v_keys.current_key_id IS NULL OR v_keys.current_key_id = p_old_key_id THEN
    -- The copies under the key replaced before this one are dropped: nobody current needs it.
    UPDATE account_credentials SET previous_key_id = NULL, previous_wrapped_key = NULL
     WHERE previous_key_id IS NOT NULL;
    UPDATE master_keys
       SET current_key_id = p_new_key_id, previous_key_id = p_old_key_id, rotated_at = now(),
           updated_at = now();
    INSERT INTO events (subject_kind, subject_id, event, detail)
    VALUES ('master_key', 1, 'master_key_rotated',
            jsonb_build_object('from_key_id', p_old_key_id, 'to_key_id', p_new_key_id));
  ELSIF NOT (v_keys.current_key_id = p_new_key_id
             AND v_keys.previous_key_id IS NOT DISTINCT FROM p_old_key_id) THEN
    PERFORM mdame._not_current_key(v_keys, p_old_key_id, 'the rotation starts from');
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    v_from := v_item ->> 'key_id';
    v_expected := decode(v_item ->> 'expected_wrapped_key', 'base64');
    v_wrapped := decode(v_item ->> 'wrapped_key', 'base64');
    CONTINUE WHEN v_from = p_new_key_id;  -- already under the new key
    -- The copy under the replaced key is kept for the readers' grace period; a data key that
    -- was under an older key (a grant the last rotation could not re-wrap) has none to keep.
    UPDATE account_credentials c
       SET previous_key_id = CASE WHEN c.key_id = p_old_key_id THEN c.key_id END,
           previous_wrapped_key = CASE WHEN c.key_id = p_old_key_id THEN c.wrapped_key END,
           key_id = p_new_key_id, wrapped_key = v_wrapped, updated_at = now()
     WHERE c.account_id = (v_item ->> 'account_id')::bigint
       AND c.key_id = v_from AND c.wrapped_key = v_expected;
    GET DIAGNOSTICS v_found = ROW_COUNT;
    IF v_found = 1 THEN
      INSERT INTO events (subject_kind, subject_id, event, detail)
      VALUES ('account', (v_item ->> 'account_id')::bigint, 'credential_rewrapped',
              jsonb_build_object('from_key_id', v_from, 'to_key_id', p_new_key_id));
    END IF;
  END LOOP;
  RETURN QUERY SELECT c.account_id, c.key_id FROM account_credentials c
                WHERE c.key_id <> p_new_key_id ORDER BY c.account_id;
EXCEPTION
  WHEN invalid_text_representation OR invalid_parameter_value OR numeric_value_out_of_range THEN
    PERFORM mdame._invalid('items need integer account_id and base64 wrapped keys');
END
$function$;
REVOKE ALL ON FUNCTION mdame.rewrap_account_credentials(p_old_key_id text, p_new_key_id text, p_items jsonb) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.rewrap_account_credentials(p_old_key_id text, p_new_key_id text, p_items jsonb) TO mdame_admin;

-- The master key record, locked for the caller's transaction (grants and rotations serialise).
CREATE OR REPLACE FUNCTION mdame._master_keys()
 RETURNS mdame.master_keys
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_keys mdame.master_keys;
BEGIN
  SELECT * INTO v_keys FROM mdame.master_keys FOR UPDATE;
  IF v_keys.singleton IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = 'mdame: master_keys has no row';
  END IF;
  RETURN v_keys;
END
$function$;
REVOKE ALL ON FUNCTION mdame._master_keys() FROM PUBLIC, mdame_app, mdame_admin;

-- Raises MD003: p_key_id is not the database's current master key.
CREATE OR REPLACE FUNCTION mdame._not_current_key(p_keys mdame.master_keys, p_key_id text, p_what text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD003',
    MESSAGE = format('mdame: %s master key %s, but the current master key is %s%s: load the '
                     'current key (MDAME_MASTER_KEY or the key file) and try again', p_what,
                     p_key_id, p_keys.current_key_id,
                     CASE WHEN p_keys.previous_key_id = p_key_id
                          THEN format(' (it replaced %s at %s)', p_key_id, p_keys.rotated_at)
                          ELSE '' END);
END
$function$;
REVOKE ALL ON FUNCTION mdame._not_current_key(p_keys mdame.master_keys, p_key_id text, p_what text) FROM PUBLIC, mdame_app, mdame_admin;

-- A provider that rotates refresh tokens (TikTok) answers a new grant with every refresh, and
-- the old one may stop working: the publisher seals the new grant and replaces the one it
-- refreshed with, under the pipeline lock. Compare-and-swap: replaced only while the stored
-- ciphertext is still p_expected_ciphertext (the grant it read), and only under the current
-- master key or under the stored data key with its wrapped copies unchanged (a publisher not
-- yet redeployed after a rotation, without the current key, can store no other way, and the
-- provider will not take the old grant back); returns false when the stored grant changed
-- meanwhile (an operator's reconnect wins). needs_reauth is left as it is: only `mdame
-- accounts connect` clears it.
CREATE OR REPLACE FUNCTION mdame.replace_rotated_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea, p_expected_ciphertext bytea, p_lock_token bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_account dimension_accounts;
  v_keys master_keys;
BEGIN
  PERFORM mdame._require_match('key_id', p_key_id, '^[0-9a-f]{16}$'),
          mdame._require_not_null('wrapped_key', p_wrapped_key),
          mdame._require_not_null('ciphertext', p_ciphertext),
          mdame._require_not_null('expected_ciphertext', p_expected_ciphertext);
  IF length(p_wrapped_key) NOT BETWEEN 40 AND 200 OR length(p_ciphertext) NOT BETWEEN 29 AND 20000
  THEN
    PERFORM mdame._invalid('wrapped_key/ciphertext do not look like AES-GCM envelopes');
  END IF;
  SELECT * INTO v_account FROM dimension_accounts
   WHERE id = mdame._require_not_null('account_id', p_account_id) FOR NO KEY UPDATE;
  IF v_account.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006',
      MESSAGE = format('mdame: account %s does not exist', p_account_id);
  END IF;
  PERFORM mdame._fence(v_account.dimension_id, p_lock_token);
  v_keys := mdame._master_keys();
  IF v_keys.current_key_id IS DISTINCT FROM p_key_id
     AND NOT EXISTS (SELECT FROM account_credentials c WHERE c.account_id = p_account_id
                        AND c.key_id = p_key_id AND c.wrapped_key = p_wrapped_key) THEN
    PERFORM mdame._not_current_key(v_keys, p_key_id, 'the rotated grant is sealed under');
  END IF;
  -- The same data key keeps its copy under the replaced key (readers in their grace period).
  UPDATE account_credentials c
     SET key_id = p_key_id, wrapped_key = p_wrapped_key, ciphertext = p_ciphertext,
         previous_key_id = CASE WHEN c.wrapped_key = p_wrapped_key THEN c.previous_key_id END,
         previous_wrapped_key = CASE WHEN c.wrapped_key = p_wrapped_key
                                     THEN c.previous_wrapped_key END,
         updated_at = now()
   WHERE c.account_id = p_account_id AND c.ciphertext = p_expected_ciphertext;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('account', p_account_id, 'credential_rotated', jsonb_build_object('key_id', p_key_id));
  RETURN true;
END
$function$;
REVOKE ALL ON FUNCTION mdame.replace_rotated_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea, p_expected_ciphertext bytea, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.replace_rotated_credential(p_account_id bigint, p_key_id text, p_wrapped_key bytea, p_ciphertext bytea, p_expected_ciphertext bytea, p_lock_token bigint) TO mdame_app;
