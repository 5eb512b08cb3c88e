-- When a gone session's upload is searched for again is no secret (unlike its URI): the hop
-- sensor and `mdame demo` read it, as the app role, to say until when a partition waits.
GRANT SELECT (gone_seen_at, gone_settle_after) ON TABLE mdame.upload_sessions TO mdame_app;

-- The calls still in flight, whose leases the same reads look for on every sensor tick: a few
-- rows among every attempt ever made.
CREATE INDEX provider_attempts_in_flight ON mdame.provider_attempts (lease_expires_at)
    WHERE status = 'submitted';
