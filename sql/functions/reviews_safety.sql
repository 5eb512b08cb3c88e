-- Reviews and safety decisions on renders.
--
-- The current definition of each function, applied by mdame_core.migrate after the
-- versioned migrations whenever this file changes (README, "Database").

SET LOCAL client_min_messages = warning;
SET LOCAL search_path = mdame, pg_temp;

CREATE OR REPLACE FUNCTION mdame.record_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._fence(mdame._unit_dimension('render', p_render_id), p_lock_token);
  RETURN mdame._record_review(p_render_id, p_content_sha256, p_check_name, p_verdict, p_detail);
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_lock_token bigint) TO mdame_app;

-- Approved means: the latest review of the render is of this very file (a review of another
-- hash, a re-rendered or tampered file, voids older approvals); every check recorded on this
-- file has 'approved' as its latest verdict; and every check in p_required_checks (the
-- dimension's required set) has such a verdict. An empty or NULL set is refused: it would make
-- an unreviewed file approved.
CREATE OR REPLACE FUNCTION mdame.is_approved(p_render_id bigint, p_content_sha256 text, p_required_checks text[])
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_check text;
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id),
          mdame._require_sha256('content_sha256', p_content_sha256);
  IF p_required_checks IS NULL OR cardinality(p_required_checks) = 0 THEN
    PERFORM mdame._invalid('required_checks must name at least one check');
  END IF;
  FOREACH v_check IN ARRAY p_required_checks LOOP
    PERFORM mdame._require_match('required check', v_check, '^[a-z][a-z0-9_.-]{0,62}$');
  END LOOP;
  IF NOT EXISTS (SELECT FROM renders WHERE id = p_render_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: render %s does not exist', p_render_id);
  END IF;
  RETURN coalesce((
    SELECT r.content_sha256 = p_content_sha256 FROM reviews r
     WHERE r.render_id = p_render_id ORDER BY r.id DESC LIMIT 1), false)
    AND coalesce((
      SELECT bool_and(latest.verdict = 'approved')
             AND array_agg(latest.check_name) @> p_required_checks
        FROM (SELECT DISTINCT ON (r.check_name) r.check_name, r.verdict FROM reviews r
               WHERE r.render_id = p_render_id AND r.content_sha256 = p_content_sha256
               ORDER BY r.check_name, r.id DESC) latest), false);
END
$function$;
REVOKE ALL ON FUNCTION mdame.is_approved(p_render_id bigint, p_content_sha256 text, p_required_checks text[]) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.is_approved(p_render_id bigint, p_content_sha256 text, p_required_checks text[]) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame.log_safety_decision(p_subject_kind text, p_subject_key text, p_dimension_slug text, p_verdict text, p_rule text, p_reasons jsonb, p_classifier text, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  IF p_dimension_slug IS NULL THEN  -- a decision about no dimension's work
    PERFORM mdame._fence_token(p_lock_token);
  ELSE
    PERFORM mdame._fence(mdame._dimension_id(p_dimension_slug), p_lock_token);
  END IF;
  RETURN mdame._log_safety_decision(p_subject_kind, p_subject_key, p_dimension_slug, p_verdict,
                                    p_rule, p_reasons, p_classifier);
END
$function$;
REVOKE ALL ON FUNCTION mdame.log_safety_decision(p_subject_kind text, p_subject_key text, p_dimension_slug text, p_verdict text, p_rule text, p_reasons jsonb, p_classifier text, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.log_safety_decision(p_subject_kind text, p_subject_key text, p_dimension_slug text, p_verdict text, p_rule text, p_reasons jsonb, p_classifier text, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._record_bound_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_request_sha256 text, p_acceptance jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
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
$function$;
REVOKE ALL ON FUNCTION mdame._record_bound_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_request_sha256 text, p_acceptance jsonb) FROM PUBLIC, mdame_app, mdame_admin;

-- One review (a human's, or a later re-review), bound like the render's own.
CREATE OR REPLACE FUNCTION mdame.record_bound_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_request_sha256 text, p_acceptance jsonb, p_lock_token bigint)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id);
  PERFORM mdame._fence(mdame._unit_dimension('render', p_render_id), p_lock_token);
  RETURN mdame._record_bound_review(p_render_id, p_content_sha256, p_check_name, p_verdict,
                                    p_detail, p_request_sha256, p_acceptance);
END
$function$;
REVOKE ALL ON FUNCTION mdame.record_bound_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_request_sha256 text, p_acceptance jsonb, p_lock_token bigint) FROM PUBLIC, mdame_app, mdame_admin;
GRANT EXECUTE ON FUNCTION mdame.record_bound_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb, p_request_sha256 text, p_acceptance jsonb, p_lock_token bigint) TO mdame_app;

CREATE OR REPLACE FUNCTION mdame._log_safety_decision(p_subject_kind text, p_subject_key text, p_dimension_slug text, p_verdict text, p_rule text, p_reasons jsonb, p_classifier text)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_dimension bigint;
  v_id bigint;
BEGIN
  PERFORM mdame._require_match('subject_kind', p_subject_kind, '^[a-z][a-z_]{0,40}$'),
          mdame._require_text('subject_key', p_subject_key),
          mdame._require_one_of('verdict', p_verdict, ARRAY['allow', 'review', 'block']),
          mdame._require_text('rule', p_rule, 200), mdame._require_json('reasons', p_reasons, 'array'),
          mdame._require_text('classifier', p_classifier, 200);
  IF p_dimension_slug IS NOT NULL THEN
    v_dimension := mdame._dimension_id(p_dimension_slug);
  END IF;
  INSERT INTO safety_audit_logs (subject_kind, subject_key, dimension_id, verdict, rule, reasons,
                                 classifier)
  VALUES (p_subject_kind, p_subject_key, v_dimension, p_verdict, p_rule, p_reasons, p_classifier)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._log_safety_decision(p_subject_kind text, p_subject_key text, p_dimension_slug text, p_verdict text, p_rule text, p_reasons jsonb, p_classifier text) FROM PUBLIC, mdame_app, mdame_admin;

CREATE OR REPLACE FUNCTION mdame._record_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb DEFAULT '{}'::jsonb)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'mdame', 'pg_temp'
AS $function$
DECLARE
  v_id bigint;
BEGIN
  PERFORM mdame._require_not_null('render_id', p_render_id),
          mdame._require_sha256('content_sha256', p_content_sha256),
          mdame._require_match('check_name', p_check_name, '^[a-z][a-z0-9_.-]{0,62}$'),
          mdame._require_one_of('verdict', p_verdict, ARRAY['approved', 'rejected']),
          mdame._require_json('detail', p_detail);
  IF NOT EXISTS (SELECT FROM renders WHERE id = p_render_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'MD006', MESSAGE = format('mdame: render %s does not exist', p_render_id);
  END IF;
  INSERT INTO reviews (render_id, content_sha256, check_name, verdict, detail)
  VALUES (p_render_id, p_content_sha256, p_check_name, p_verdict, p_detail)
  RETURNING id INTO v_id;
  RETURN v_id;
END
$function$;
REVOKE ALL ON FUNCTION mdame._record_review(p_render_id bigint, p_content_sha256 text, p_check_name text, p_verdict text, p_detail jsonb) FROM PUBLIC, mdame_app, mdame_admin;
