-- The environment guard: a database belongs to exactly one ENV.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

-- Once recorded the ENV never changes: a dev database must not silently become prod.
CREATE OR REPLACE FUNCTION mdame.environment_is_immutable()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD001',
    MESSAGE = 'mdame: the database environment is recorded once and never changed';
END
$function$;
REVOKE ALL ON FUNCTION mdame.environment_is_immutable() FROM PUBLIC, mdame_app, mdame_admin;
CREATE OR REPLACE TRIGGER environment_is_immutable BEFORE DELETE OR UPDATE ON mdame.environment FOR EACH ROW EXECUTE FUNCTION mdame.environment_is_immutable();
CREATE OR REPLACE TRIGGER environment_is_not_truncated BEFORE TRUNCATE ON mdame.environment FOR EACH STATEMENT EXECUTE FUNCTION mdame.environment_is_immutable();
