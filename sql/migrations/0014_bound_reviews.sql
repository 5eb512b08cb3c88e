-- 0014: reviews bound to the file, the request and the acceptance context; channel
-- thumbnails (issue 11, slice "probe").
--
-- A review already names the render and the SHA-256 of the reviewed bytes (0001; approval is
-- looked up by that exact hash, 0003). It now also records the request it judged (the digest
-- of the render's inputs) and the acceptance context (policy version, checks, thresholds), so
-- a review says which file, made from what, passed under which rules.
-- record_reviewed_render is record_render (0005) with several reviews (technical, content):
-- the render is approved only when every one of them has no problem.
-- record_thumbnail notes on a published video whether its custom thumbnail was set.

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

ALTER TABLE reviews
  ADD COLUMN request_sha256 text CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),
  ADD COLUMN acceptance jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(acceptance) = 'object');

CREATE FUNCTION mdame._record_bound_review(p_render_id bigint, p_content_sha256 text,
                                           p_check_name text, p_verdict text, p_detail jsonb,
                                           p_request_sha256 text, p_acceptance jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._require_sha256('request_sha256', p_request_sha256),
          mdame._require_json('acceptance', p_acceptance);
  IF length(p_acceptance::text) > 20000 THEN
    PERFORM mdame._invalid('acceptance is over 20000 characters');
  END IF;
  v_id := mdame._record_review(p_render_id, p_content_sha256, p_check_name, p_verdict, p_detail);
  UPDATE mdame.reviews SET request_sha256 = p_request_sha256, acceptance = p_acceptance
   WHERE id = v_id;
  RETURN v_id;
END
$$;

-- One review (a human's, or a later re-review), bound like the render's own.
CREATE FUNCTION mdame.record_bound_review(p_render_id bigint, p_content_sha256 text,
                                          p_check_name text, p_verdict text, p_detail jsonb,
                                          p_request_sha256 text, p_acceptance jsonb,
                                          p_lock_token bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id);
  PERFORM mdame._fence(mdame._unit_dimension('render', p_render_id), p_lock_token);
  RETURN mdame._record_bound_review(p_render_id, p_content_sha256, p_check_name, p_verdict,
                                    p_detail, p_request_sha256, p_acceptance);
END
$$;

-- renders: the render (once), each review ({"check_name", "problems": [...], "acceptance":
-- {...}}) bound to payload.sha256 and payload.request_sha256, the render approved or rejected,
-- and the script rendered or failed with every problem, together. Returns the script's state.
CREATE FUNCTION mdame.record_reviewed_render(p_script_id bigint, p_idempotency_key text,
                                             p_payload jsonb, p_reviews jsonb,
                                             p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_id bigint;
  v_review jsonb;
  v_problems jsonb := '[]';
  v_verdict text;
BEGIN
  PERFORM mdame._require_json('payload', p_payload),
          mdame._require_json('reviews', p_reviews, 'array');
  PERFORM mdame._fence(mdame._unit_dimension('script', p_script_id), p_lock_token);
  PERFORM mdame._require_sha256('payload.sha256', p_payload ->> 'sha256'),
          mdame._require_sha256('payload.request_sha256', p_payload ->> 'request_sha256');
  IF jsonb_array_length(p_reviews) = 0 THEN
    PERFORM mdame._invalid('a render needs at least one review');
  END IF;
  FOR v_review IN SELECT * FROM jsonb_array_elements(p_reviews) LOOP
    PERFORM mdame._require_json('review', v_review),
            mdame._require_match('review.check_name', v_review ->> 'check_name',
                                 '^[a-z][a-z0-9_.-]{0,62}$'),
            mdame._require_json('review.problems', v_review -> 'problems', 'array'),
            mdame._require_json('review.acceptance', v_review -> 'acceptance');
    v_problems := v_problems || (v_review -> 'problems');
  END LOOP;
  PERFORM mdame._require_state('script', p_script_id, ARRAY['render_queued']);
  IF (p_payload ->> 'script_id')::bigint IS DISTINCT FROM p_script_id THEN
    PERFORM mdame._invalid(format('render payload belongs to another script than %s', p_script_id));
  END IF;
  v_id := mdame._upsert_work_unit('render', p_idempotency_key, p_payload);
  v_verdict := CASE WHEN jsonb_array_length(v_problems) = 0 THEN 'approved' ELSE 'rejected' END;
  IF mdame._lock_work_unit(mdame._work_kind('render'), v_id) = 'rendered' THEN
    FOR v_review IN SELECT * FROM jsonb_array_elements(p_reviews) LOOP
      PERFORM mdame._record_bound_review(
        v_id, p_payload ->> 'sha256', v_review ->> 'check_name',
        CASE WHEN jsonb_array_length(v_review -> 'problems') = 0 THEN 'approved' ELSE 'rejected' END,
        jsonb_build_object('problems', v_review -> 'problems'),
        p_payload ->> 'request_sha256', v_review -> 'acceptance');
    END LOOP;
    PERFORM mdame._transition('render', v_id, 'rendered', v_verdict, '{}');
  END IF;
  IF v_verdict = 'approved' THEN
    PERFORM mdame._transition('script', p_script_id, 'render_queued', 'rendered',
                              jsonb_build_object('render_id', v_id));
    RETURN 'rendered';
  END IF;
  PERFORM mdame._transition('script', p_script_id, 'render_queued', 'failed',
                            jsonb_build_object('render_id', v_id, 'render_problems', v_problems));
  RETURN 'failed';
END
$$;

-- A published video's custom thumbnail: set, refused by the channel (not a failure of the
-- publication) or failed. Recorded once: the first outcome stands (a retried run that finds it
-- does not set the thumbnail again).
CREATE FUNCTION mdame.record_thumbnail(p_publication_id bigint, p_status text, p_detail jsonb,
                                       p_lock_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = mdame, pg_temp AS $$
DECLARE
  v_pub publications;
BEGIN
  PERFORM mdame._require_not_null('publication_id', p_publication_id),
          mdame._require_one_of('status', p_status, ARRAY['set', 'refused', 'failed']),
          mdame._require_json('detail', p_detail);
  IF length(p_detail::text) > 4000 THEN
    PERFORM mdame._invalid('detail is over 4000 characters');
  END IF;
  PERFORM mdame._fence(mdame._unit_dimension('publication', p_publication_id), p_lock_token);
  PERFORM mdame._lock_work_unit(mdame._work_kind('publication'), p_publication_id);
  SELECT * INTO v_pub FROM publications WHERE id = p_publication_id;
  IF v_pub.state <> 'published' THEN
    RAISE EXCEPTION USING ERRCODE = 'MD003',
      MESSAGE = format('mdame: publication %s is %s, not published', p_publication_id,
                       v_pub.state);
  END IF;
  IF v_pub.result ? 'thumbnail' THEN
    RETURN v_pub.result -> 'thumbnail' ->> 'status';
  END IF;
  UPDATE publications
     SET result = result || jsonb_build_object('thumbnail', p_detail || jsonb_build_object(
                                                 'status', p_status)),
         updated_at = now()
   WHERE id = p_publication_id;
  INSERT INTO events (subject_kind, subject_id, event, detail)
  VALUES ('publication', p_publication_id, 'thumbnail',
          p_detail || jsonb_build_object('status', p_status));
  RETURN p_status;
END
$$;

REVOKE ALL ON FUNCTION
  mdame._record_bound_review(bigint, text, text, text, jsonb, text, jsonb)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
  mdame.record_bound_review(bigint, text, text, text, jsonb, text, jsonb, bigint),
  mdame.record_reviewed_render(bigint, text, jsonb, jsonb, bigint),
  mdame.record_thumbnail(bigint, text, jsonb, bigint)
TO mdame_app;
