-- The visuals chain: a scene's picture says which engine made it, its relevance judgement and
-- where it came from, in the cache entry (so a cache hit carries them) and in the scene's result.
ALTER TABLE mdame.scene_cache
    ADD COLUMN detail jsonb NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT scene_cache_detail_check
        CHECK (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 16384);

-- Their results changed shape (the detail): the function files create them anew.
DROP FUNCTION IF EXISTS mdame.lookup_scene_cache(text);
DROP FUNCTION IF EXISTS mdame.put_scene_cache(text, text, text, integer);
DROP FUNCTION IF EXISTS mdame.complete_scene_job(bigint, text, integer, bigint, text, text, boolean, integer);

-- A scene that no engine of its chain could picture rejects its script, with the reasons.
INSERT INTO mdame.allowed_transitions (kind, from_state, to_state)
VALUES ('script', 'planned', 'rejected');
