-- The outbox stops being a platform. It is the provider that stands in for every platform
-- offline (MDAME_PROVIDERS chooses it), and in production an `outbox` account published to
-- YouTube: such an account becomes what it is, a youtube one, and the registered configs say so
-- too (their accounts and publish_to), as the edited dimension files will.
--
-- Its publication keys and its sealed grant were derived with the name it was registered
-- under, so it keeps that name in registered_as (Account.key_platform): a video it published
-- is found published under the same key, never uploaded again, an upload in flight is found on
-- the channel by the same marker, and its grant still opens.
ALTER TABLE mdame.dimension_accounts
    ADD COLUMN registered_as text
        CONSTRAINT dimension_accounts_registered_as_check
        CHECK (registered_as ~ '^[a-z][a-z0-9_]{0,39}$');

DO $migration$
DECLARE
  v_clash text;
  v_accounts integer;
  v_configs integer;
BEGIN
  -- A handle is unique per platform: an outbox account whose handle a youtube account also
  -- has cannot become youtube. Nothing is changed then; the message names them.
  SELECT string_agg(format('%s (dimensions %s and %s)', o.handle, od.slug, yd.slug), ', '
                    ORDER BY o.handle)
    INTO v_clash
    FROM mdame.dimension_accounts o
    JOIN mdame.dimension_accounts y ON y.platform = 'youtube' AND y.handle = o.handle
    JOIN mdame.dimensions od ON od.id = o.dimension_id
    JOIN mdame.dimensions yd ON yd.id = y.dimension_id
   WHERE o.platform = 'outbox';
  IF v_clash IS NOT NULL THEN
    RAISE EXCEPTION USING MESSAGE = format(
      'mdame: outbox accounts become youtube accounts, but these handles are registered as '
      'both outbox and youtube: %s. One handle is one YouTube channel: keep one of the two '
      'accounts (give the other a handle of its own), then migrate again; nothing was changed',
      v_clash);
  END IF;

  UPDATE mdame.dimension_accounts
     SET platform = 'youtube', registered_as = 'outbox', updated_at = now()
   WHERE platform = 'outbox';
  GET DIAGNOSTICS v_accounts = ROW_COUNT;

  UPDATE mdame.dimensions
     SET config = config
         || CASE WHEN jsonb_typeof(config -> 'accounts') = 'array' THEN jsonb_build_object(
              'accounts',
              (SELECT coalesce(jsonb_agg(CASE WHEN a ->> 'platform' = 'outbox'
                                              THEN a || '{"platform": "youtube"}'::jsonb
                                              ELSE a END ORDER BY n), '[]'::jsonb)
                 FROM jsonb_array_elements(config -> 'accounts') WITH ORDINALITY AS t(a, n)))
            ELSE '{}'::jsonb END
         || CASE WHEN jsonb_typeof(config -> 'publish_to') = 'array' THEN jsonb_build_object(
              'publish_to',
              (SELECT coalesce(jsonb_agg(CASE WHEN p = '"outbox"'::jsonb
                                              THEN '"youtube"'::jsonb
                                              ELSE p END ORDER BY n), '[]'::jsonb)
                 FROM jsonb_array_elements(config -> 'publish_to') WITH ORDINALITY AS t(p, n)))
            ELSE '{}'::jsonb END,
         updated_at = now()
   WHERE config -> 'accounts' @> '[{"platform": "outbox"}]'::jsonb
      OR config -> 'publish_to' @> '["outbox"]'::jsonb;
  GET DIAGNOSTICS v_configs = ROW_COUNT;

  -- A WARNING, not a NOTICE: the runner passes on what the server sends at warning and above,
  -- and the dimension files must be edited the same way.
  IF v_accounts > 0 OR v_configs > 0 THEN
    RAISE WARNING USING MESSAGE = format(
      '%s outbox account(s) are youtube accounts now, and %s registered dimension config(s) '
      'say youtube where they said outbox: the outbox is the offline provider that stands in '
      'for every platform (MDAME_PROVIDERS), not a platform. Their videos are not published '
      'again. Write platform: youtube (and youtube in publish_to) in the dimension files; '
      'one that still says outbox is refused',
      v_accounts, v_configs);
  END IF;
END
$migration$;

ALTER TABLE mdame.dimension_accounts
    ADD CONSTRAINT dimension_accounts_platform_not_outbox CHECK (platform <> 'outbox');
