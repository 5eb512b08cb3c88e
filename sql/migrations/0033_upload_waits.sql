-- When a gone session's upload is searched for again is no secret (unlike its URI): the hop
-- sensor and `mdame demo` read it, as the app role, to say until when a partition waits.
GRANT SELECT (gone_seen_at, gone_settle_after) ON TABLE mdame.upload_sessions TO mdame_app;
