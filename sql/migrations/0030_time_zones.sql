-- The time zone names this server knows, read once here: an account's quota_timezone is
-- checked against them by an index probe (mdame._is_time_zone). Reading pg_timezone_names
-- walks the server's zone files (about 40 ms), and the check runs on every update of an
-- account row: a quota pause, a reconnect, a registry sync.
CREATE TABLE mdame.time_zones (
    name text PRIMARY KEY
);
INSERT INTO mdame.time_zones (name) SELECT name FROM pg_timezone_names ON CONFLICT DO NOTHING;
ALTER TABLE mdame.time_zones ENABLE ROW LEVEL SECURITY;
CREATE POLICY admin_reads ON mdame.time_zones FOR SELECT TO mdame_admin USING (true);
CREATE POLICY app_reads ON mdame.time_zones FOR SELECT TO mdame_app USING (true);
GRANT SELECT ON TABLE mdame.time_zones TO mdame_app;
GRANT SELECT ON TABLE mdame.time_zones TO mdame_admin;
