-- Pipeline writes that were unfenced now take the writer's pipeline-lock token (and the feed
-- cache its dimension); the Adaptive Engine's limits come from the dimension's registered
-- config, not from the caller. Their signatures change: the old versions go.
DROP FUNCTION IF EXISTS mdame.record_feed_fetch(text, text, text, jsonb);
DROP FUNCTION IF EXISTS mdame.apply_param_set(text, date, date, jsonb, jsonb, jsonb, text);
DROP FUNCTION IF EXISTS mdame.record_video_stats(date, jsonb);
DROP FUNCTION IF EXISTS mdame.store_report(text, date, jsonb, text, jsonb);
DROP FUNCTION IF EXISTS mdame.record_alert(text, text, date, text, integer);
