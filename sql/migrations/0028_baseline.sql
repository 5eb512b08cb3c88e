-- The schema baseline: every table, view, sequence, index, policy and grant as the per-change
-- migrations 0001-0028 left them, squashed into one file (their names and checksums are in
-- squashed.txt; a database migrated by them is recorded as having this baseline instead).
-- Functions and the triggers that call them are not here: each lives, current, in one file
-- under sql/functions/, applied after the versioned migrations.
--
-- Run by mdame_core.migrate inside one transaction, connected as the owner role (mdame_owner on
-- the local cluster). The owner owns every object. The pipeline's role (mdame_app) and the
-- operator's (mdame_admin) may read tables and execute the functions granted to them by name;
-- every state change goes through a SECURITY DEFINER function, so neither can do
-- read-modify-write on state rows.
--
-- Conventions: money is bigint micro-units; timestamps are timestamptz; every table that a retry
-- could create twice carries a UNIQUE idempotency key.

SET LOCAL client_min_messages = warning;
SELECT pg_catalog.set_config('search_path', '', true);

-- The roles normally exist (scripts/db-local.sh creates them); on an external database they are
-- created here so the grants below resolve. The owner is a member of both, so it can SET ROLE
-- to act as either (the operator's owner URL acts as admin).
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mdame_app') THEN
    CREATE ROLE mdame_app NOLOGIN;
    EXECUTE format('GRANT mdame_app TO %I', current_user);
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mdame_admin') THEN
    CREATE ROLE mdame_admin NOLOGIN;
    EXECUTE format('GRANT mdame_admin TO %I', current_user);
  END IF;
END
$$;

-- PUBLIC gets nothing: PostgreSQL grants EXECUTE on new functions to PUBLIC by default, and that
-- default can only be revoked globally, not per schema. A new function is the owner's alone
-- until its file under sql/functions/ grants it to a role by name.
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Tables, their id sequences and the views over them
-- ---------------------------------------------------------------------------------------------

CREATE TABLE mdame.alerts (
    id bigint NOT NULL,
    dimension_slug text NOT NULL,
    cause text NOT NULL,
    day date NOT NULL,
    text text NOT NULL,
    occurrences integer DEFAULT 1 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    claimed_until timestamp with time zone,
    delivered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    claim_token uuid,
    CONSTRAINT alerts_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT alerts_cause_check CHECK ((cause = ANY (ARRAY['run_failure'::text, 'halt'::text, 'reauth_needed'::text, 'budget_cap'::text, 'quota_exhausted'::text, 'check_blocked'::text, 'disk_low'::text, 'provider_refused'::text]))),
    CONSTRAINT alerts_dimension_slug_check CHECK (((dimension_slug = ''::text) OR (dimension_slug ~ '^[a-z][a-z0-9_-]{1,39}$'::text))),
    CONSTRAINT alerts_last_error_check CHECK ((length(last_error) <= 2000)),
    CONSTRAINT alerts_occurrences_check CHECK ((occurrences >= 1)),
    CONSTRAINT alerts_text_check CHECK (((length(text) >= 1) AND (length(text) <= 20000)))
);

CREATE TABLE mdame.publications (
    id bigint NOT NULL,
    kind text DEFAULT 'publication'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    script_id bigint NOT NULL,
    render_id bigint NOT NULL,
    account_id bigint NOT NULL,
    content_sha256 text,
    CONSTRAINT publications_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT publications_content_sha256_check CHECK ((content_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT publications_kind_check CHECK ((kind = 'publication'::text)),
    CONSTRAINT publications_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT publications_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE TABLE mdame.dimension_accounts (
    id bigint NOT NULL,
    dimension_id bigint NOT NULL,
    platform text NOT NULL,
    handle text NOT NULL,
    daily_quota_units integer NOT NULL,
    active boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    quota_timezone text DEFAULT 'America/Los_Angeles'::text NOT NULL,
    daily_insert_calls integer DEFAULT 100 NOT NULL,
    daily_search_calls integer DEFAULT 100 NOT NULL,
    paused_until timestamp with time zone,
    pause_reason text,
    needs_reauth boolean DEFAULT false NOT NULL,
    CONSTRAINT dimension_accounts_daily_insert_calls_check CHECK ((daily_insert_calls >= 0)),
    CONSTRAINT dimension_accounts_daily_quota_units_check CHECK ((daily_quota_units >= 0)),
    CONSTRAINT dimension_accounts_daily_search_calls_check CHECK ((daily_search_calls >= 0)),
    CONSTRAINT dimension_accounts_handle_check CHECK (((length(handle) >= 1) AND (length(handle) <= 200))),
    CONSTRAINT dimension_accounts_pause_reason_check CHECK ((length(pause_reason) <= 200)),
    CONSTRAINT dimension_accounts_platform_check CHECK ((platform ~ '^[a-z][a-z0-9_]{0,39}$'::text))
);

CREATE TABLE mdame.param_sets (
    id bigint NOT NULL,
    dimension_id bigint NOT NULL,
    version integer NOT NULL,
    parent_version integer,
    week_start date NOT NULL,
    effective_from date NOT NULL,
    params jsonb NOT NULL,
    limits jsonb NOT NULL,
    changes jsonb DEFAULT '[]'::jsonb NOT NULL,
    explanation text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    rolled_back_at timestamp with time zone,
    rollback_reason text,
    CONSTRAINT param_sets_changes_check CHECK ((jsonb_typeof(changes) = 'array'::text)),
    CONSTRAINT param_sets_check CHECK (((parent_version >= 1) AND (parent_version < version))),
    CONSTRAINT param_sets_explanation_check CHECK (((length(explanation) >= 1) AND (length(explanation) <= 20000))),
    CONSTRAINT param_sets_limits_check CHECK ((jsonb_typeof(limits) = 'object'::text)),
    CONSTRAINT param_sets_params_check CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT param_sets_rollback_reason_check CHECK ((length(rollback_reason) <= 2000)),
    CONSTRAINT param_sets_version_check CHECK ((version >= 1))
);

CREATE TABLE mdame.system_locks (
    lock_name text NOT NULL,
    holder text NOT NULL,
    token bigint NOT NULL,
    ttl_seconds integer NOT NULL,
    acquired_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    released_at timestamp with time zone,
    CONSTRAINT system_locks_holder_check CHECK (((length(holder) >= 1) AND (length(holder) <= 200))),
    CONSTRAINT system_locks_lock_name_check CHECK (((length(lock_name) >= 1) AND (length(lock_name) <= 200))),
    CONSTRAINT system_locks_ttl_seconds_check CHECK ((ttl_seconds > 0))
);

CREATE TABLE mdame.provider_attempts (
    id bigint NOT NULL,
    work_key text NOT NULL,
    attempt_no integer NOT NULL,
    provider text NOT NULL,
    request_hash text NOT NULL,
    status text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    lock_token bigint,
    lease_grace_seconds integer,
    lease_expires_at timestamp with time zone,
    CONSTRAINT provider_attempts_attempt_no_check CHECK ((attempt_no >= 1)),
    CONSTRAINT provider_attempts_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text)),
    CONSTRAINT provider_attempts_lease_grace_seconds_check CHECK ((lease_grace_seconds >= 0)),
    CONSTRAINT provider_attempts_provider_check CHECK (((length(provider) >= 1) AND (length(provider) <= 100))),
    CONSTRAINT provider_attempts_request_hash_check CHECK (((length(request_hash) >= 1) AND (length(request_hash) <= 128))),
    CONSTRAINT provider_attempts_status_check CHECK ((status = ANY (ARRAY['submitted'::text, 'unknown'::text, 'succeeded'::text, 'failed'::text]))),
    CONSTRAINT provider_attempts_work_key_check CHECK (((length(work_key) >= 1) AND (length(work_key) <= 512)))
);

CREATE TABLE mdame.budget_ledger (
    id bigint NOT NULL,
    scope text NOT NULL,
    period text NOT NULL,
    attempt_key text NOT NULL,
    state text DEFAULT 'reserved'::text NOT NULL,
    reserved_micros bigint NOT NULL,
    actual_micros bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT budget_ledger_actual_micros_check CHECK ((actual_micros >= 0)),
    CONSTRAINT budget_ledger_attempt_key_check CHECK (((length(attempt_key) >= 1) AND (length(attempt_key) <= 512))),
    CONSTRAINT budget_ledger_check CHECK (((state = 'settled'::text) = (actual_micros IS NOT NULL))),
    CONSTRAINT budget_ledger_reserved_micros_check CHECK ((reserved_micros >= 0)),
    CONSTRAINT budget_ledger_state_check CHECK ((state = ANY (ARRAY['reserved'::text, 'settled'::text, 'released'::text])))
);

CREATE TABLE mdame.quota_ledger (
    id bigint NOT NULL,
    account_id bigint NOT NULL,
    day date NOT NULL,
    quota_key text NOT NULL,
    units integer NOT NULL,
    state text DEFAULT 'reserved'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    bucket text DEFAULT 'units'::text NOT NULL,
    CONSTRAINT quota_ledger_bucket_check CHECK ((bucket = ANY (ARRAY['insert'::text, 'search'::text, 'units'::text]))),
    CONSTRAINT quota_ledger_quota_key_check CHECK (((length(quota_key) >= 1) AND (length(quota_key) <= 512))),
    CONSTRAINT quota_ledger_state_check CHECK ((state = ANY (ARRAY['reserved'::text, 'committed'::text, 'released'::text]))),
    CONSTRAINT quota_ledger_units_check CHECK ((units > 0))
);

CREATE TABLE mdame.work_kinds (
    kind text NOT NULL,
    table_name text NOT NULL,
    initial_state text NOT NULL,
    CONSTRAINT work_kinds_kind_check CHECK ((kind ~ '^[a-z][a-z_]{0,40}$'::text))
);

CREATE TABLE mdame.master_keys (
    singleton boolean DEFAULT true NOT NULL,
    current_key_id text,
    previous_key_id text,
    rotated_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT master_keys_check CHECK (((previous_key_id IS NULL) OR ((current_key_id IS NOT NULL) AND (rotated_at IS NOT NULL) AND (previous_key_id <> current_key_id)))),
    CONSTRAINT master_keys_current_key_id_check CHECK ((current_key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT master_keys_previous_key_id_check CHECK ((previous_key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT master_keys_singleton_check CHECK (singleton)
);

CREATE TABLE mdame.scenes (
    id bigint NOT NULL,
    kind text DEFAULT 'scene'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    script_id bigint NOT NULL,
    scene_index integer NOT NULL,
    scene_hash text NOT NULL,
    CONSTRAINT scenes_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT scenes_kind_check CHECK ((kind = 'scene'::text)),
    CONSTRAINT scenes_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT scenes_result_check CHECK ((jsonb_typeof(result) = 'object'::text)),
    CONSTRAINT scenes_scene_hash_check CHECK (((length(scene_hash) >= 1) AND (length(scene_hash) <= 128))),
    CONSTRAINT scenes_scene_index_check CHECK ((scene_index >= 0))
);

CREATE TABLE mdame.account_credentials (
    account_id bigint NOT NULL,
    key_id text NOT NULL,
    wrapped_key bytea NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    previous_key_id text,
    previous_wrapped_key bytea,
    CONSTRAINT account_credentials_ciphertext_check CHECK (((length(ciphertext) >= 29) AND (length(ciphertext) <= 20000))),
    CONSTRAINT account_credentials_key_id_check CHECK ((key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT account_credentials_previous_key_id_check CHECK ((previous_key_id ~ '^[0-9a-f]{16}$'::text)),
    CONSTRAINT account_credentials_previous_whole CHECK (((previous_key_id IS NULL) = (previous_wrapped_key IS NULL))),
    CONSTRAINT account_credentials_previous_wrapped_key_check CHECK (((length(previous_wrapped_key) >= 40) AND (length(previous_wrapped_key) <= 200))),
    CONSTRAINT account_credentials_wrapped_key_check CHECK (((length(wrapped_key) >= 40) AND (length(wrapped_key) <= 200)))
);

CREATE SEQUENCE mdame.alerts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.alerts_id_seq OWNED BY mdame.alerts.id;

CREATE TABLE mdame.allowed_transitions (
    kind text NOT NULL,
    from_state text NOT NULL,
    to_state text NOT NULL,
    CONSTRAINT allowed_transitions_check CHECK ((from_state <> to_state))
);

CREATE TABLE mdame.budget_caps (
    scope text NOT NULL,
    period text NOT NULL,
    cap_micros bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT budget_caps_cap_micros_check CHECK ((cap_micros >= 0)),
    CONSTRAINT budget_caps_period_check CHECK ((period ~ '^[A-Za-z0-9][A-Za-z0-9:._-]{0,63}$'::text)),
    CONSTRAINT budget_caps_scope_check CHECK ((scope ~ '^[A-Za-z0-9][A-Za-z0-9:._/-]{0,199}$'::text))
);

CREATE SEQUENCE mdame.budget_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.budget_ledger_id_seq OWNED BY mdame.budget_ledger.id;

CREATE VIEW mdame.budget_usage WITH (security_invoker='true') AS
 SELECT c.scope,
    c.period,
    c.cap_micros,
    (COALESCE(sum(l.reserved_micros) FILTER (WHERE (l.state = 'reserved'::text)), (0)::numeric))::bigint AS reserved_micros,
    (COALESCE(sum(l.actual_micros) FILTER (WHERE (l.state = 'settled'::text)), (0)::numeric))::bigint AS settled_micros
   FROM (mdame.budget_caps c
     LEFT JOIN mdame.budget_ledger l ON (((l.scope = c.scope) AND (l.period = c.period))))
  GROUP BY c.scope, c.period, c.cap_micros;

CREATE SEQUENCE mdame.dimension_accounts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.dimension_accounts_id_seq OWNED BY mdame.dimension_accounts.id;

CREATE TABLE mdame.dimensions (
    id bigint NOT NULL,
    slug text NOT NULL,
    title text NOT NULL,
    config jsonb DEFAULT '{}'::jsonb NOT NULL,
    active boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT dimensions_config_check CHECK ((jsonb_typeof(config) = 'object'::text)),
    CONSTRAINT dimensions_slug_check CHECK ((slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'::text)),
    CONSTRAINT dimensions_title_check CHECK (((length(title) >= 1) AND (length(title) <= 200)))
);

CREATE SEQUENCE mdame.dimensions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.dimensions_id_seq OWNED BY mdame.dimensions.id;

CREATE TABLE mdame.environment (
    singleton boolean DEFAULT true NOT NULL,
    env text NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT environment_env_check CHECK ((env = ANY (ARRAY['dev'::text, 'prod'::text]))),
    CONSTRAINT environment_singleton_check CHECK (singleton)
);

CREATE TABLE mdame.events (
    id bigint NOT NULL,
    subject_kind text NOT NULL,
    subject_id bigint NOT NULL,
    event text NOT NULL,
    from_state text,
    to_state text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT events_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text))
);

CREATE SEQUENCE mdame.events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.events_id_seq OWNED BY mdame.events.id;

CREATE TABLE mdame.feed_cache (
    id bigint NOT NULL,
    source_url text NOT NULL,
    etag text,
    last_modified text,
    items jsonb DEFAULT '[]'::jsonb NOT NULL,
    fetched_at timestamp with time zone,
    not_modified_at timestamp with time zone,
    failures integer DEFAULT 0 NOT NULL,
    last_error text,
    last_error_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT feed_cache_etag_check CHECK ((length(etag) <= 1000)),
    CONSTRAINT feed_cache_failures_check CHECK ((failures >= 0)),
    CONSTRAINT feed_cache_items_check CHECK ((jsonb_typeof(items) = 'array'::text)),
    CONSTRAINT feed_cache_last_error_check CHECK ((length(last_error) <= 2000)),
    CONSTRAINT feed_cache_last_modified_check CHECK ((length(last_modified) <= 200)),
    CONSTRAINT feed_cache_source_url_check CHECK ((((length(source_url) >= 1) AND (length(source_url) <= 2000)) AND (source_url !~* '[?&;]key='::text)))
);

CREATE SEQUENCE mdame.feed_cache_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.feed_cache_id_seq OWNED BY mdame.feed_cache.id;

CREATE TABLE mdame.job_keys (
    idempotency_key text NOT NULL,
    job_id bigint NOT NULL,
    CONSTRAINT job_keys_idempotency_key_check CHECK (((length(idempotency_key) >= 1) AND (length(idempotency_key) <= 512)))
);

CREATE TABLE mdame.jobs (
    id bigint NOT NULL,
    job_type text NOT NULL,
    idempotency_key text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'queued'::text NOT NULL,
    priority integer DEFAULT 100 NOT NULL,
    run_after timestamp with time zone DEFAULT now() NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    partition_key text,
    started_at timestamp with time zone,
    CONSTRAINT jobs_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT jobs_check CHECK ((attempt <= max_attempts)),
    CONSTRAINT jobs_check1 CHECK (((state = 'running'::text) = (lease_expires_at IS NOT NULL))),
    CONSTRAINT jobs_check2 CHECK (((state <> 'running'::text) OR (lease_owner IS NOT NULL))),
    CONSTRAINT jobs_check3 CHECK (((state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'dead'::text])) = (finished_at IS NOT NULL))),
    CONSTRAINT jobs_job_type_check CHECK ((job_type ~ '^[a-z][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT jobs_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT jobs_partition_key_check CHECK (((partition_key IS NULL) OR ((length(partition_key) >= 1) AND (length(partition_key) <= 200)))),
    CONSTRAINT jobs_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT jobs_result_check CHECK ((jsonb_typeof(result) = 'object'::text)),
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'dead'::text])))
);

CREATE SEQUENCE mdame.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.jobs_id_seq OWNED BY mdame.jobs.id;

CREATE SEQUENCE mdame.lock_tokens
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

CREATE TABLE mdame.media_collections (
    uri text NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    reason text NOT NULL,
    holder text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    collected_at timestamp with time zone,
    CONSTRAINT media_collections_check CHECK (((state = 'collected'::text) = (collected_at IS NOT NULL))),
    CONSTRAINT media_collections_holder_check CHECK (((length(holder) >= 1) AND (length(holder) <= 200))),
    CONSTRAINT media_collections_kind_check CHECK ((kind = ANY (ARRAY['clip'::text, 'voice'::text, 'render'::text, 'thumbnail'::text]))),
    CONSTRAINT media_collections_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 1000))),
    CONSTRAINT media_collections_state_check CHECK ((state = ANY (ARRAY['collecting'::text, 'collected'::text]))),
    CONSTRAINT media_collections_uri_check CHECK ((uri ~ '^media://sha256/[0-9a-f]{64}(\.[A-Za-z0-9]{1,10})?$'::text))
);

CREATE TABLE mdame.paid_call_refusals (
    id bigint NOT NULL,
    dimension_id bigint NOT NULL,
    scope text NOT NULL,
    provider text NOT NULL,
    work_key text NOT NULL,
    request_hash text NOT NULL,
    attempt_id bigint NOT NULL,
    cause jsonb NOT NULL,
    day date NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    rearmed_at timestamp with time zone,
    rearm_reason text,
    CONSTRAINT paid_call_refusals_cause_check CHECK ((jsonb_typeof(cause) = 'object'::text)),
    CONSTRAINT paid_call_refusals_provider_check CHECK (((length(provider) >= 1) AND (length(provider) <= 100))),
    CONSTRAINT paid_call_refusals_rearm_reason_check CHECK ((length(rearm_reason) <= 2000)),
    CONSTRAINT paid_call_refusals_request_hash_check CHECK (((length(request_hash) >= 1) AND (length(request_hash) <= 128))),
    CONSTRAINT paid_call_refusals_scope_check CHECK ((scope = ANY (ARRAY['request'::text, 'model'::text, 'key'::text]))),
    CONSTRAINT paid_call_refusals_work_key_check CHECK (((length(work_key) >= 1) AND (length(work_key) <= 512)))
);

CREATE SEQUENCE mdame.paid_call_refusals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.paid_call_refusals_id_seq OWNED BY mdame.paid_call_refusals.id;

CREATE SEQUENCE mdame.param_sets_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.param_sets_id_seq OWNED BY mdame.param_sets.id;

CREATE TABLE mdame.pipeline_runs (
    id bigint NOT NULL,
    execution_id uuid NOT NULL,
    dimension_id bigint,
    partition_key text NOT NULL,
    lock_token bigint,
    status text DEFAULT 'running'::text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT pipeline_runs_check CHECK (((status = 'running'::text) = (finished_at IS NULL))),
    CONSTRAINT pipeline_runs_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text)),
    CONSTRAINT pipeline_runs_partition_key_check CHECK (((length(partition_key) >= 1) AND (length(partition_key) <= 200))),
    CONSTRAINT pipeline_runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text])))
);

CREATE SEQUENCE mdame.pipeline_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.pipeline_runs_id_seq OWNED BY mdame.pipeline_runs.id;

CREATE SEQUENCE mdame.provider_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.provider_attempts_id_seq OWNED BY mdame.provider_attempts.id;

CREATE SEQUENCE mdame.publications_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.publications_id_seq OWNED BY mdame.publications.id;

CREATE VIEW mdame.quota_bucket_usage WITH (security_invoker='true') AS
 SELECT l.account_id,
    l.day,
    l.bucket,
    COALESCE(sum(l.units) FILTER (WHERE (l.state = 'reserved'::text)), (0)::bigint) AS reserved_units,
    COALESCE(sum(l.units) FILTER (WHERE (l.state = 'committed'::text)), (0)::bigint) AS committed_units
   FROM mdame.quota_ledger l
  GROUP BY l.account_id, l.day, l.bucket;

CREATE SEQUENCE mdame.quota_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.quota_ledger_id_seq OWNED BY mdame.quota_ledger.id;

CREATE VIEW mdame.quota_usage WITH (security_invoker='true') AS
 SELECT l.account_id,
    l.day,
    a.daily_quota_units AS cap_units,
    COALESCE(sum(l.units) FILTER (WHERE (l.state = 'reserved'::text)), (0)::bigint) AS reserved_units,
    COALESCE(sum(l.units) FILTER (WHERE (l.state = 'committed'::text)), (0)::bigint) AS committed_units
   FROM (mdame.quota_ledger l
     JOIN mdame.dimension_accounts a ON ((a.id = l.account_id)))
  WHERE (l.bucket = 'units'::text)
  GROUP BY l.account_id, l.day, a.daily_quota_units;

CREATE TABLE mdame.renders (
    id bigint NOT NULL,
    kind text DEFAULT 'render'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    script_id bigint NOT NULL,
    CONSTRAINT renders_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT renders_kind_check CHECK ((kind = 'render'::text)),
    CONSTRAINT renders_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT renders_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE SEQUENCE mdame.renders_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.renders_id_seq OWNED BY mdame.renders.id;

CREATE TABLE mdame.reports (
    id bigint NOT NULL,
    dimension_id bigint NOT NULL,
    week_start date NOT NULL,
    metrics jsonb NOT NULL,
    markdown text NOT NULL,
    images jsonb DEFAULT '[]'::jsonb NOT NULL,
    revision integer DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT reports_images_check CHECK ((jsonb_typeof(images) = 'array'::text)),
    CONSTRAINT reports_markdown_check CHECK (((length(markdown) >= 1) AND (length(markdown) <= 200000))),
    CONSTRAINT reports_metrics_check CHECK ((jsonb_typeof(metrics) = 'object'::text)),
    CONSTRAINT reports_revision_check CHECK ((revision >= 1)),
    CONSTRAINT reports_week_start_check CHECK ((EXTRACT(isodow FROM week_start) = (1)::numeric))
);

CREATE SEQUENCE mdame.reports_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.reports_id_seq OWNED BY mdame.reports.id;

CREATE TABLE mdame.reviews (
    id bigint NOT NULL,
    render_id bigint NOT NULL,
    content_sha256 text NOT NULL,
    check_name text NOT NULL,
    verdict text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    request_sha256 text,
    acceptance jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT reviews_acceptance_check CHECK ((jsonb_typeof(acceptance) = 'object'::text)),
    CONSTRAINT reviews_check_name_check CHECK ((check_name ~ '^[a-z][a-z0-9_.-]{0,62}$'::text)),
    CONSTRAINT reviews_content_sha256_check CHECK ((content_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT reviews_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text)),
    CONSTRAINT reviews_request_sha256_check CHECK ((request_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT reviews_verdict_check CHECK ((verdict = ANY (ARRAY['approved'::text, 'rejected'::text])))
);

CREATE SEQUENCE mdame.reviews_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.reviews_id_seq OWNED BY mdame.reviews.id;

CREATE TABLE mdame.safety_audit_logs (
    id bigint NOT NULL,
    subject_kind text NOT NULL,
    subject_key text NOT NULL,
    dimension_id bigint,
    verdict text NOT NULL,
    rule text NOT NULL,
    reasons jsonb DEFAULT '[]'::jsonb NOT NULL,
    classifier text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT safety_audit_logs_classifier_check CHECK (((length(classifier) >= 1) AND (length(classifier) <= 200))),
    CONSTRAINT safety_audit_logs_reasons_check CHECK ((jsonb_typeof(reasons) = 'array'::text)),
    CONSTRAINT safety_audit_logs_rule_check CHECK (((length(rule) >= 1) AND (length(rule) <= 200))),
    CONSTRAINT safety_audit_logs_subject_key_check CHECK (((length(subject_key) >= 1) AND (length(subject_key) <= 512))),
    CONSTRAINT safety_audit_logs_subject_kind_check CHECK ((subject_kind ~ '^[a-z][a-z_]{0,40}$'::text)),
    CONSTRAINT safety_audit_logs_verdict_check CHECK ((verdict = ANY (ARRAY['allow'::text, 'review'::text, 'block'::text])))
);

CREATE SEQUENCE mdame.safety_audit_logs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.safety_audit_logs_id_seq OWNED BY mdame.safety_audit_logs.id;

CREATE TABLE mdame.scene_cache (
    scene_hash text NOT NULL,
    uri text NOT NULL,
    content_sha256 text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT scene_cache_content_sha256_check CHECK ((content_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT scene_cache_scene_hash_check CHECK (((length(scene_hash) >= 1) AND (length(scene_hash) <= 128))),
    CONSTRAINT scene_cache_uri_check CHECK (((length(uri) >= 1) AND (length(uri) <= 2000)))
);

CREATE SEQUENCE mdame.scenes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.scenes_id_seq OWNED BY mdame.scenes.id;

CREATE TABLE mdame.scripts (
    id bigint NOT NULL,
    kind text DEFAULT 'script'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    dimension_id bigint NOT NULL,
    partition_date date NOT NULL,
    topic_id bigint NOT NULL,
    CONSTRAINT scripts_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT scripts_kind_check CHECK ((kind = 'script'::text)),
    CONSTRAINT scripts_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT scripts_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE SEQUENCE mdame.scripts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.scripts_id_seq OWNED BY mdame.scripts.id;

CREATE TABLE mdame.topics (
    id bigint NOT NULL,
    kind text DEFAULT 'topic'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    dimension_id bigint NOT NULL,
    partition_date date NOT NULL,
    trend_id bigint,
    CONSTRAINT topics_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT topics_kind_check CHECK ((kind = 'topic'::text)),
    CONSTRAINT topics_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT topics_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE SEQUENCE mdame.topics_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.topics_id_seq OWNED BY mdame.topics.id;

CREATE TABLE mdame.trends (
    id bigint NOT NULL,
    kind text DEFAULT 'trend'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    dimension_id bigint NOT NULL,
    partition_date date NOT NULL,
    CONSTRAINT trends_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT trends_kind_check CHECK ((kind = 'trend'::text)),
    CONSTRAINT trends_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT trends_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE SEQUENCE mdame.trends_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.trends_id_seq OWNED BY mdame.trends.id;

CREATE TABLE mdame.upload_charges (
    attempt_id bigint NOT NULL,
    publication_id bigint NOT NULL,
    counted boolean DEFAULT true NOT NULL,
    reason text,
    quota_key text,
    sent_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT upload_charges_quota_key_check CHECK ((length(quota_key) <= 512)),
    CONSTRAINT upload_charges_reason_check CHECK ((length(reason) <= 500))
);

CREATE TABLE mdame.upload_sessions (
    attempt_id bigint NOT NULL,
    publication_id bigint NOT NULL,
    session_uri text NOT NULL,
    content_sha256 text NOT NULL,
    size_bytes bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    gone_seen_at timestamp with time zone,
    gone_settle_after timestamp with time zone,
    CONSTRAINT upload_sessions_content_sha256_check CHECK ((content_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT upload_sessions_gone_check CHECK ((((gone_seen_at IS NULL) = (gone_settle_after IS NULL)) AND ((gone_settle_after IS NULL) OR (gone_settle_after >= gone_seen_at)))),
    CONSTRAINT upload_sessions_session_uri_check CHECK (((session_uri ~ '^(https?|file)://'::text) AND (length(session_uri) <= 4000))),
    CONSTRAINT upload_sessions_size_bytes_check CHECK ((size_bytes > 0))
);

CREATE TABLE mdame.video_stats (
    publication_id bigint NOT NULL,
    day date NOT NULL,
    dimension_id bigint NOT NULL,
    video_id text NOT NULL,
    views bigint NOT NULL,
    likes bigint NOT NULL,
    comments bigint NOT NULL,
    fetched_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT video_stats_comments_check CHECK ((comments >= 0)),
    CONSTRAINT video_stats_likes_check CHECK ((likes >= 0)),
    CONSTRAINT video_stats_video_id_check CHECK (((length(video_id) >= 1) AND (length(video_id) <= 200))),
    CONSTRAINT video_stats_views_check CHECK ((views >= 0))
);

CREATE TABLE mdame.voice_halts (
    script_id bigint NOT NULL,
    halts integer NOT NULL,
    max_halts integer,
    last_reason text NOT NULL,
    halted_at timestamp with time zone NOT NULL,
    next_retry_at timestamp with time zone,
    retried_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    permanent boolean DEFAULT false NOT NULL,
    retry_until timestamp with time zone,
    CONSTRAINT voice_halts_halts_check CHECK ((halts >= 1)),
    CONSTRAINT voice_halts_max_halts_check CHECK ((max_halts >= 1))
);

CREATE TABLE mdame.voice_tracks (
    id bigint NOT NULL,
    kind text DEFAULT 'voice_track'::text NOT NULL,
    idempotency_key text NOT NULL,
    state text NOT NULL,
    payload jsonb NOT NULL,
    result jsonb DEFAULT '{}'::jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    script_id bigint NOT NULL,
    CONSTRAINT voice_tracks_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT voice_tracks_kind_check CHECK ((kind = 'voice_track'::text)),
    CONSTRAINT voice_tracks_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT voice_tracks_result_check CHECK ((jsonb_typeof(result) = 'object'::text))
);

CREATE SEQUENCE mdame.voice_tracks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE mdame.voice_tracks_id_seq OWNED BY mdame.voice_tracks.id;

CREATE TABLE mdame.work_states (
    kind text NOT NULL,
    state text NOT NULL,
    is_terminal boolean NOT NULL,
    CONSTRAINT work_states_state_check CHECK ((state ~ '^[a-z][a-z_]{0,40}$'::text))
);

-- ---------------------------------------------------------------------------------------------
-- Column defaults
-- ---------------------------------------------------------------------------------------------

ALTER TABLE ONLY mdame.alerts ALTER COLUMN id SET DEFAULT nextval('mdame.alerts_id_seq'::regclass);

ALTER TABLE ONLY mdame.budget_ledger ALTER COLUMN id SET DEFAULT nextval('mdame.budget_ledger_id_seq'::regclass);

ALTER TABLE ONLY mdame.dimension_accounts ALTER COLUMN id SET DEFAULT nextval('mdame.dimension_accounts_id_seq'::regclass);

ALTER TABLE ONLY mdame.dimensions ALTER COLUMN id SET DEFAULT nextval('mdame.dimensions_id_seq'::regclass);

ALTER TABLE ONLY mdame.events ALTER COLUMN id SET DEFAULT nextval('mdame.events_id_seq'::regclass);

ALTER TABLE ONLY mdame.feed_cache ALTER COLUMN id SET DEFAULT nextval('mdame.feed_cache_id_seq'::regclass);

ALTER TABLE ONLY mdame.jobs ALTER COLUMN id SET DEFAULT nextval('mdame.jobs_id_seq'::regclass);

ALTER TABLE ONLY mdame.paid_call_refusals ALTER COLUMN id SET DEFAULT nextval('mdame.paid_call_refusals_id_seq'::regclass);

ALTER TABLE ONLY mdame.param_sets ALTER COLUMN id SET DEFAULT nextval('mdame.param_sets_id_seq'::regclass);

ALTER TABLE ONLY mdame.pipeline_runs ALTER COLUMN id SET DEFAULT nextval('mdame.pipeline_runs_id_seq'::regclass);

ALTER TABLE ONLY mdame.provider_attempts ALTER COLUMN id SET DEFAULT nextval('mdame.provider_attempts_id_seq'::regclass);

ALTER TABLE ONLY mdame.publications ALTER COLUMN id SET DEFAULT nextval('mdame.publications_id_seq'::regclass);

ALTER TABLE ONLY mdame.quota_ledger ALTER COLUMN id SET DEFAULT nextval('mdame.quota_ledger_id_seq'::regclass);

ALTER TABLE ONLY mdame.renders ALTER COLUMN id SET DEFAULT nextval('mdame.renders_id_seq'::regclass);

ALTER TABLE ONLY mdame.reports ALTER COLUMN id SET DEFAULT nextval('mdame.reports_id_seq'::regclass);

ALTER TABLE ONLY mdame.reviews ALTER COLUMN id SET DEFAULT nextval('mdame.reviews_id_seq'::regclass);

ALTER TABLE ONLY mdame.safety_audit_logs ALTER COLUMN id SET DEFAULT nextval('mdame.safety_audit_logs_id_seq'::regclass);

ALTER TABLE ONLY mdame.scenes ALTER COLUMN id SET DEFAULT nextval('mdame.scenes_id_seq'::regclass);

ALTER TABLE ONLY mdame.scripts ALTER COLUMN id SET DEFAULT nextval('mdame.scripts_id_seq'::regclass);

ALTER TABLE ONLY mdame.topics ALTER COLUMN id SET DEFAULT nextval('mdame.topics_id_seq'::regclass);

ALTER TABLE ONLY mdame.trends ALTER COLUMN id SET DEFAULT nextval('mdame.trends_id_seq'::regclass);

ALTER TABLE ONLY mdame.voice_tracks ALTER COLUMN id SET DEFAULT nextval('mdame.voice_tracks_id_seq'::regclass);

-- ---------------------------------------------------------------------------------------------
-- Keys and unique constraints
-- ---------------------------------------------------------------------------------------------

ALTER TABLE ONLY mdame.account_credentials
    ADD CONSTRAINT account_credentials_pkey PRIMARY KEY (account_id);

ALTER TABLE ONLY mdame.alerts
    ADD CONSTRAINT alerts_dimension_slug_cause_day_key UNIQUE (dimension_slug, cause, day);

ALTER TABLE ONLY mdame.alerts
    ADD CONSTRAINT alerts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.allowed_transitions
    ADD CONSTRAINT allowed_transitions_pkey PRIMARY KEY (kind, from_state, to_state);

ALTER TABLE ONLY mdame.budget_caps
    ADD CONSTRAINT budget_caps_pkey PRIMARY KEY (scope, period);

ALTER TABLE ONLY mdame.budget_ledger
    ADD CONSTRAINT budget_ledger_attempt_key_key UNIQUE (attempt_key);

ALTER TABLE ONLY mdame.budget_ledger
    ADD CONSTRAINT budget_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.dimension_accounts
    ADD CONSTRAINT dimension_accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.dimension_accounts
    ADD CONSTRAINT dimension_accounts_platform_handle_key UNIQUE (platform, handle);

ALTER TABLE ONLY mdame.dimensions
    ADD CONSTRAINT dimensions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.dimensions
    ADD CONSTRAINT dimensions_slug_key UNIQUE (slug);

ALTER TABLE ONLY mdame.environment
    ADD CONSTRAINT environment_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY mdame.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.feed_cache
    ADD CONSTRAINT feed_cache_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.feed_cache
    ADD CONSTRAINT feed_cache_source_url_key UNIQUE (source_url);

ALTER TABLE ONLY mdame.job_keys
    ADD CONSTRAINT job_keys_pkey PRIMARY KEY (idempotency_key);

ALTER TABLE ONLY mdame.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.master_keys
    ADD CONSTRAINT master_keys_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY mdame.media_collections
    ADD CONSTRAINT media_collections_pkey PRIMARY KEY (uri);

ALTER TABLE ONLY mdame.paid_call_refusals
    ADD CONSTRAINT paid_call_refusals_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.param_sets
    ADD CONSTRAINT param_sets_dimension_id_version_key UNIQUE (dimension_id, version);

ALTER TABLE ONLY mdame.param_sets
    ADD CONSTRAINT param_sets_dimension_id_week_start_key UNIQUE (dimension_id, week_start);

ALTER TABLE ONLY mdame.param_sets
    ADD CONSTRAINT param_sets_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.pipeline_runs
    ADD CONSTRAINT pipeline_runs_execution_id_key UNIQUE (execution_id);

ALTER TABLE ONLY mdame.pipeline_runs
    ADD CONSTRAINT pipeline_runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.provider_attempts
    ADD CONSTRAINT provider_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.provider_attempts
    ADD CONSTRAINT provider_attempts_work_key_attempt_no_key UNIQUE (work_key, attempt_no);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_same_bytes_once_per_account UNIQUE (account_id, content_sha256);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_script_id_account_id_key UNIQUE (script_id, account_id);

ALTER TABLE ONLY mdame.quota_ledger
    ADD CONSTRAINT quota_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.quota_ledger
    ADD CONSTRAINT quota_ledger_quota_key_key UNIQUE (quota_key);

ALTER TABLE ONLY mdame.renders
    ADD CONSTRAINT renders_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.renders
    ADD CONSTRAINT renders_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.reports
    ADD CONSTRAINT reports_dimension_id_week_start_key UNIQUE (dimension_id, week_start);

ALTER TABLE ONLY mdame.reports
    ADD CONSTRAINT reports_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.reviews
    ADD CONSTRAINT reviews_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.safety_audit_logs
    ADD CONSTRAINT safety_audit_logs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.scene_cache
    ADD CONSTRAINT scene_cache_pkey PRIMARY KEY (scene_hash);

ALTER TABLE ONLY mdame.scenes
    ADD CONSTRAINT scenes_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.scenes
    ADD CONSTRAINT scenes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.scenes
    ADD CONSTRAINT scenes_script_id_scene_index_key UNIQUE (script_id, scene_index);

ALTER TABLE ONLY mdame.scripts
    ADD CONSTRAINT scripts_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.scripts
    ADD CONSTRAINT scripts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.system_locks
    ADD CONSTRAINT system_locks_pkey PRIMARY KEY (lock_name);

ALTER TABLE ONLY mdame.topics
    ADD CONSTRAINT topics_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.topics
    ADD CONSTRAINT topics_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.trends
    ADD CONSTRAINT trends_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.trends
    ADD CONSTRAINT trends_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.upload_charges
    ADD CONSTRAINT upload_charges_pkey PRIMARY KEY (attempt_id);

ALTER TABLE ONLY mdame.upload_sessions
    ADD CONSTRAINT upload_sessions_pkey PRIMARY KEY (attempt_id);

ALTER TABLE ONLY mdame.video_stats
    ADD CONSTRAINT video_stats_pkey PRIMARY KEY (publication_id, day);

ALTER TABLE ONLY mdame.voice_halts
    ADD CONSTRAINT voice_halts_pkey PRIMARY KEY (script_id);

ALTER TABLE ONLY mdame.voice_tracks
    ADD CONSTRAINT voice_tracks_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY mdame.voice_tracks
    ADD CONSTRAINT voice_tracks_pkey PRIMARY KEY (id);

ALTER TABLE ONLY mdame.work_kinds
    ADD CONSTRAINT work_kinds_pkey PRIMARY KEY (kind);

ALTER TABLE ONLY mdame.work_kinds
    ADD CONSTRAINT work_kinds_table_name_key UNIQUE (table_name);

ALTER TABLE ONLY mdame.work_states
    ADD CONSTRAINT work_states_pkey PRIMARY KEY (kind, state);

-- ---------------------------------------------------------------------------------------------
-- Indexes
-- ---------------------------------------------------------------------------------------------

CREATE INDEX alerts_undelivered ON mdame.alerts USING btree (created_at) WHERE (delivered_at IS NULL);

CREATE INDEX budget_ledger_scope_period_idx ON mdame.budget_ledger USING btree (scope, period);

CREATE INDEX events_subject_idx ON mdame.events USING btree (subject_kind, subject_id, id);

CREATE INDEX jobs_queued_idx ON mdame.jobs USING btree (job_type, priority, id) WHERE (state = 'queued'::text);

CREATE INDEX jobs_queued_partition_idx ON mdame.jobs USING btree (job_type, partition_key, priority, id) WHERE (state = 'queued'::text);

CREATE INDEX jobs_running_lease_idx ON mdame.jobs USING btree (lease_expires_at) WHERE (state = 'running'::text);

CREATE INDEX paid_call_refusals_open ON mdame.paid_call_refusals USING btree (dimension_id) WHERE (rearmed_at IS NULL);

CREATE INDEX pipeline_runs_dimension_idx ON mdame.pipeline_runs USING btree (dimension_id, started_at);

CREATE INDEX publications_render_idx ON mdame.publications USING btree (render_id);

CREATE INDEX quota_ledger_account_day_idx ON mdame.quota_ledger USING btree (account_id, day, bucket);

CREATE INDEX renders_script_idx ON mdame.renders USING btree (script_id);

CREATE INDEX reviews_render_idx ON mdame.reviews USING btree (render_id, id);

CREATE INDEX safety_audit_logs_subject_idx ON mdame.safety_audit_logs USING btree (subject_kind, subject_key);

CREATE INDEX scene_cache_uri_idx ON mdame.scene_cache USING btree (uri);

CREATE INDEX scenes_hash_idx ON mdame.scenes USING btree (scene_hash);

CREATE INDEX scripts_dimension_date_idx ON mdame.scripts USING btree (dimension_id, partition_date);

CREATE INDEX scripts_topic_idx ON mdame.scripts USING btree (topic_id);

CREATE INDEX topics_dimension_date_idx ON mdame.topics USING btree (dimension_id, partition_date);

CREATE INDEX trends_dimension_date_idx ON mdame.trends USING btree (dimension_id, partition_date);

CREATE INDEX upload_charges_publication_idx ON mdame.upload_charges USING btree (publication_id);

CREATE INDEX upload_sessions_publication_idx ON mdame.upload_sessions USING btree (publication_id);

CREATE INDEX video_stats_dimension_day_idx ON mdame.video_stats USING btree (dimension_id, day);

CREATE INDEX voice_halts_due_idx ON mdame.voice_halts USING btree (next_retry_at) WHERE (next_retry_at IS NOT NULL);

CREATE INDEX voice_tracks_script_idx ON mdame.voice_tracks USING btree (script_id);

-- ---------------------------------------------------------------------------------------------
-- Foreign keys
-- ---------------------------------------------------------------------------------------------

ALTER TABLE ONLY mdame.account_credentials
    ADD CONSTRAINT account_credentials_account_id_fkey FOREIGN KEY (account_id) REFERENCES mdame.dimension_accounts(id);

ALTER TABLE ONLY mdame.allowed_transitions
    ADD CONSTRAINT allowed_transitions_kind_from_state_fkey FOREIGN KEY (kind, from_state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.allowed_transitions
    ADD CONSTRAINT allowed_transitions_kind_to_state_fkey FOREIGN KEY (kind, to_state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.budget_ledger
    ADD CONSTRAINT budget_ledger_scope_period_fkey FOREIGN KEY (scope, period) REFERENCES mdame.budget_caps(scope, period);

ALTER TABLE ONLY mdame.dimension_accounts
    ADD CONSTRAINT dimension_accounts_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.paid_call_refusals
    ADD CONSTRAINT paid_call_refusals_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES mdame.provider_attempts(id);

ALTER TABLE ONLY mdame.paid_call_refusals
    ADD CONSTRAINT paid_call_refusals_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.param_sets
    ADD CONSTRAINT param_sets_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.pipeline_runs
    ADD CONSTRAINT pipeline_runs_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_account_id_fkey FOREIGN KEY (account_id) REFERENCES mdame.dimension_accounts(id);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_render_id_fkey FOREIGN KEY (render_id) REFERENCES mdame.renders(id);

ALTER TABLE ONLY mdame.publications
    ADD CONSTRAINT publications_script_id_fkey FOREIGN KEY (script_id) REFERENCES mdame.scripts(id);

ALTER TABLE ONLY mdame.quota_ledger
    ADD CONSTRAINT quota_ledger_account_id_fkey FOREIGN KEY (account_id) REFERENCES mdame.dimension_accounts(id);

ALTER TABLE ONLY mdame.renders
    ADD CONSTRAINT renders_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.renders
    ADD CONSTRAINT renders_script_id_fkey FOREIGN KEY (script_id) REFERENCES mdame.scripts(id);

ALTER TABLE ONLY mdame.reports
    ADD CONSTRAINT reports_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.reviews
    ADD CONSTRAINT reviews_render_id_fkey FOREIGN KEY (render_id) REFERENCES mdame.renders(id);

ALTER TABLE ONLY mdame.safety_audit_logs
    ADD CONSTRAINT safety_audit_logs_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.scenes
    ADD CONSTRAINT scenes_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.scenes
    ADD CONSTRAINT scenes_script_id_fkey FOREIGN KEY (script_id) REFERENCES mdame.scripts(id);

ALTER TABLE ONLY mdame.scripts
    ADD CONSTRAINT scripts_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.scripts
    ADD CONSTRAINT scripts_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.scripts
    ADD CONSTRAINT scripts_topic_id_fkey FOREIGN KEY (topic_id) REFERENCES mdame.topics(id);

ALTER TABLE ONLY mdame.topics
    ADD CONSTRAINT topics_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.topics
    ADD CONSTRAINT topics_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.topics
    ADD CONSTRAINT topics_trend_id_fkey FOREIGN KEY (trend_id) REFERENCES mdame.trends(id);

ALTER TABLE ONLY mdame.trends
    ADD CONSTRAINT trends_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.trends
    ADD CONSTRAINT trends_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.upload_charges
    ADD CONSTRAINT upload_charges_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES mdame.provider_attempts(id);

ALTER TABLE ONLY mdame.upload_charges
    ADD CONSTRAINT upload_charges_publication_id_fkey FOREIGN KEY (publication_id) REFERENCES mdame.publications(id);

ALTER TABLE ONLY mdame.upload_sessions
    ADD CONSTRAINT upload_sessions_attempt_id_fkey FOREIGN KEY (attempt_id) REFERENCES mdame.provider_attempts(id);

ALTER TABLE ONLY mdame.upload_sessions
    ADD CONSTRAINT upload_sessions_publication_id_fkey FOREIGN KEY (publication_id) REFERENCES mdame.publications(id);

ALTER TABLE ONLY mdame.video_stats
    ADD CONSTRAINT video_stats_dimension_id_fkey FOREIGN KEY (dimension_id) REFERENCES mdame.dimensions(id);

ALTER TABLE ONLY mdame.video_stats
    ADD CONSTRAINT video_stats_publication_id_fkey FOREIGN KEY (publication_id) REFERENCES mdame.publications(id);

ALTER TABLE ONLY mdame.voice_halts
    ADD CONSTRAINT voice_halts_script_id_fkey FOREIGN KEY (script_id) REFERENCES mdame.scripts(id);

ALTER TABLE ONLY mdame.voice_tracks
    ADD CONSTRAINT voice_tracks_kind_state_fkey FOREIGN KEY (kind, state) REFERENCES mdame.work_states(kind, state);

ALTER TABLE ONLY mdame.voice_tracks
    ADD CONSTRAINT voice_tracks_script_id_fkey FOREIGN KEY (script_id) REFERENCES mdame.scripts(id);

ALTER TABLE ONLY mdame.work_kinds
    ADD CONSTRAINT work_kinds_initial_state_fkey FOREIGN KEY (kind, initial_state) REFERENCES mdame.work_states(kind, state) DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE ONLY mdame.work_states
    ADD CONSTRAINT work_states_kind_fkey FOREIGN KEY (kind) REFERENCES mdame.work_kinds(kind);

-- ---------------------------------------------------------------------------------------------
-- Row-level security, on for every table, and the policies: who may read which rows
-- ---------------------------------------------------------------------------------------------

ALTER TABLE mdame.account_credentials ENABLE ROW LEVEL SECURITY;

CREATE POLICY admin_reads ON mdame.account_credentials FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.alerts FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.allowed_transitions FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.budget_caps FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.budget_ledger FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.dimension_accounts FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.dimensions FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.environment FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.events FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.feed_cache FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.job_keys FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.jobs FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.master_keys FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.media_collections FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.paid_call_refusals FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.param_sets FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.pipeline_runs FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.provider_attempts FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.publications FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.quota_ledger FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.renders FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.reports FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.reviews FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.safety_audit_logs FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.scene_cache FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.scenes FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.schema_migrations FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.scripts FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.system_locks FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.topics FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.trends FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.upload_charges FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.upload_sessions FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.video_stats FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.voice_halts FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.voice_tracks FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.work_kinds FOR SELECT TO mdame_admin USING (true);

CREATE POLICY admin_reads ON mdame.work_states FOR SELECT TO mdame_admin USING (true);

ALTER TABLE mdame.alerts ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.allowed_transitions ENABLE ROW LEVEL SECURITY;

CREATE POLICY app_reads ON mdame.account_credentials FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.alerts FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.allowed_transitions FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.budget_caps FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.budget_ledger FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.dimension_accounts FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.dimensions FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.environment FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.events FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.feed_cache FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.job_keys FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.jobs FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.master_keys FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.media_collections FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.paid_call_refusals FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.param_sets FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.pipeline_runs FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.provider_attempts FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.publications FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.quota_ledger FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.renders FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.reports FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.reviews FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.safety_audit_logs FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.scene_cache FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.scenes FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.schema_migrations FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.scripts FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.system_locks FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.topics FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.trends FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.upload_charges FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.upload_sessions FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.video_stats FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.voice_halts FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.voice_tracks FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.work_kinds FOR SELECT TO mdame_app USING (true);

CREATE POLICY app_reads ON mdame.work_states FOR SELECT TO mdame_app USING (true);

ALTER TABLE mdame.budget_caps ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.budget_ledger ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.dimension_accounts ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.dimensions ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.environment ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.events ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.feed_cache ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.job_keys ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.jobs ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.master_keys ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.media_collections ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.paid_call_refusals ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.param_sets ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.pipeline_runs ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.provider_attempts ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.publications ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.quota_ledger ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.renders ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.reports ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.reviews ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.safety_audit_logs ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.scene_cache ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.scenes ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.schema_migrations ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.scripts ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.system_locks ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.topics ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.trends ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.upload_charges ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.upload_sessions ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.video_stats ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.voice_halts ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.voice_tracks ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.work_kinds ENABLE ROW LEVEL SECURITY;

ALTER TABLE mdame.work_states ENABLE ROW LEVEL SECURITY;

-- ---------------------------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------------------------

GRANT USAGE ON SCHEMA mdame TO mdame_app;
GRANT USAGE ON SCHEMA mdame TO mdame_admin;

GRANT SELECT ON TABLE mdame.alerts TO mdame_app;
GRANT SELECT ON TABLE mdame.alerts TO mdame_admin;

GRANT SELECT ON TABLE mdame.publications TO mdame_app;
GRANT SELECT ON TABLE mdame.publications TO mdame_admin;

GRANT SELECT ON TABLE mdame.dimension_accounts TO mdame_app;
GRANT SELECT ON TABLE mdame.dimension_accounts TO mdame_admin;

GRANT SELECT ON TABLE mdame.param_sets TO mdame_app;
GRANT SELECT ON TABLE mdame.param_sets TO mdame_admin;

GRANT SELECT ON TABLE mdame.system_locks TO mdame_app;
GRANT SELECT ON TABLE mdame.system_locks TO mdame_admin;

GRANT SELECT ON TABLE mdame.provider_attempts TO mdame_app;
GRANT SELECT ON TABLE mdame.provider_attempts TO mdame_admin;

GRANT SELECT ON TABLE mdame.budget_ledger TO mdame_app;
GRANT SELECT ON TABLE mdame.budget_ledger TO mdame_admin;

GRANT SELECT ON TABLE mdame.quota_ledger TO mdame_app;
GRANT SELECT ON TABLE mdame.quota_ledger TO mdame_admin;

GRANT SELECT ON TABLE mdame.work_kinds TO mdame_app;
GRANT SELECT ON TABLE mdame.work_kinds TO mdame_admin;

GRANT SELECT ON TABLE mdame.master_keys TO mdame_admin;
GRANT SELECT ON TABLE mdame.master_keys TO mdame_app;

GRANT SELECT ON TABLE mdame.scenes TO mdame_app;
GRANT SELECT ON TABLE mdame.scenes TO mdame_admin;

GRANT SELECT ON TABLE mdame.account_credentials TO mdame_app;
GRANT SELECT ON TABLE mdame.account_credentials TO mdame_admin;

GRANT SELECT ON TABLE mdame.allowed_transitions TO mdame_app;
GRANT SELECT ON TABLE mdame.allowed_transitions TO mdame_admin;

GRANT SELECT ON TABLE mdame.budget_caps TO mdame_app;
GRANT SELECT ON TABLE mdame.budget_caps TO mdame_admin;

GRANT SELECT ON TABLE mdame.budget_usage TO mdame_app;
GRANT SELECT ON TABLE mdame.budget_usage TO mdame_admin;

GRANT SELECT ON TABLE mdame.dimensions TO mdame_app;
GRANT SELECT ON TABLE mdame.dimensions TO mdame_admin;

GRANT SELECT ON TABLE mdame.environment TO mdame_app;
GRANT SELECT ON TABLE mdame.environment TO mdame_admin;

GRANT SELECT ON TABLE mdame.events TO mdame_app;
GRANT SELECT ON TABLE mdame.events TO mdame_admin;

GRANT SELECT ON TABLE mdame.feed_cache TO mdame_app;
GRANT SELECT ON TABLE mdame.feed_cache TO mdame_admin;

GRANT SELECT ON TABLE mdame.job_keys TO mdame_app;
GRANT SELECT ON TABLE mdame.job_keys TO mdame_admin;

GRANT SELECT ON TABLE mdame.jobs TO mdame_app;
GRANT SELECT ON TABLE mdame.jobs TO mdame_admin;

GRANT SELECT ON TABLE mdame.media_collections TO mdame_app;
GRANT SELECT ON TABLE mdame.media_collections TO mdame_admin;

GRANT SELECT ON TABLE mdame.paid_call_refusals TO mdame_app;
GRANT SELECT ON TABLE mdame.paid_call_refusals TO mdame_admin;

GRANT SELECT ON TABLE mdame.pipeline_runs TO mdame_app;
GRANT SELECT ON TABLE mdame.pipeline_runs TO mdame_admin;

GRANT SELECT ON TABLE mdame.quota_bucket_usage TO mdame_app;
GRANT SELECT ON TABLE mdame.quota_bucket_usage TO mdame_admin;

GRANT SELECT ON TABLE mdame.quota_usage TO mdame_app;
GRANT SELECT ON TABLE mdame.quota_usage TO mdame_admin;

GRANT SELECT ON TABLE mdame.renders TO mdame_app;
GRANT SELECT ON TABLE mdame.renders TO mdame_admin;

GRANT SELECT ON TABLE mdame.reports TO mdame_app;
GRANT SELECT ON TABLE mdame.reports TO mdame_admin;

GRANT SELECT ON TABLE mdame.reviews TO mdame_app;
GRANT SELECT ON TABLE mdame.reviews TO mdame_admin;

GRANT SELECT ON TABLE mdame.safety_audit_logs TO mdame_app;
GRANT SELECT ON TABLE mdame.safety_audit_logs TO mdame_admin;

GRANT SELECT ON TABLE mdame.scene_cache TO mdame_app;
GRANT SELECT ON TABLE mdame.scene_cache TO mdame_admin;

GRANT SELECT ON TABLE mdame.schema_migrations TO mdame_app;
GRANT SELECT ON TABLE mdame.schema_migrations TO mdame_admin;

GRANT SELECT ON TABLE mdame.scripts TO mdame_app;
GRANT SELECT ON TABLE mdame.scripts TO mdame_admin;

GRANT SELECT ON TABLE mdame.topics TO mdame_app;
GRANT SELECT ON TABLE mdame.topics TO mdame_admin;

GRANT SELECT ON TABLE mdame.trends TO mdame_app;
GRANT SELECT ON TABLE mdame.trends TO mdame_admin;

GRANT SELECT ON TABLE mdame.upload_charges TO mdame_admin;
GRANT SELECT ON TABLE mdame.upload_charges TO mdame_app;

GRANT SELECT ON TABLE mdame.upload_sessions TO mdame_admin;

GRANT SELECT(attempt_id) ON TABLE mdame.upload_sessions TO mdame_app;

GRANT SELECT(publication_id) ON TABLE mdame.upload_sessions TO mdame_app;

GRANT SELECT(content_sha256) ON TABLE mdame.upload_sessions TO mdame_app;

GRANT SELECT(size_bytes) ON TABLE mdame.upload_sessions TO mdame_app;

GRANT SELECT(created_at) ON TABLE mdame.upload_sessions TO mdame_app;

GRANT SELECT ON TABLE mdame.video_stats TO mdame_app;
GRANT SELECT ON TABLE mdame.video_stats TO mdame_admin;

GRANT SELECT ON TABLE mdame.voice_halts TO mdame_app;
GRANT SELECT ON TABLE mdame.voice_halts TO mdame_admin;

GRANT SELECT ON TABLE mdame.voice_tracks TO mdame_app;
GRANT SELECT ON TABLE mdame.voice_tracks TO mdame_admin;

GRANT SELECT ON TABLE mdame.work_states TO mdame_app;
GRANT SELECT ON TABLE mdame.work_states TO mdame_admin;

ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame GRANT SELECT ON TABLES  TO mdame_admin;

-- ---------------------------------------------------------------------------------------------
-- Reference rows: the work kinds, their states and the transitions between them
-- ---------------------------------------------------------------------------------------------
INSERT INTO mdame.work_kinds (kind, table_name, initial_state) VALUES
  ('publication', 'publications', 'pending'),
  ('render', 'renders', 'rendered'),
  ('scene', 'scenes', 'planned'),
  ('script', 'scripts', 'drafted'),
  ('topic', 'topics', 'candidate'),
  ('trend', 'trends', 'scored'),
  ('voice_track', 'voice_tracks', 'ready');

INSERT INTO mdame.work_states (kind, state, is_terminal) VALUES
  ('publication', 'failed', true),
  ('publication', 'pending', false),
  ('publication', 'published', true),
  ('publication', 'uploading', false),
  ('render', 'approved', false),
  ('render', 'failed', true),
  ('render', 'rejected', true),
  ('render', 'rendered', false),
  ('scene', 'failed', true),
  ('scene', 'planned', false),
  ('scene', 'queued', false),
  ('scene', 'ready', false),
  ('script', 'approved', false),
  ('script', 'drafted', false),
  ('script', 'failed', true),
  ('script', 'halted', false),
  ('script', 'planned', false),
  ('script', 'published', true),
  ('script', 'publishing', false),
  ('script', 'rejected', true),
  ('script', 'render_queued', false),
  ('script', 'rendered', false),
  ('script', 'visuals_ready', false),
  ('script', 'voice_queued', false),
  ('script', 'voiced', false),
  ('topic', 'approved', false),
  ('topic', 'candidate', false),
  ('topic', 'failed', true),
  ('topic', 'rejected', true),
  ('topic', 'scripted', true),
  ('trend', 'failed', true),
  ('trend', 'scored', true),
  ('voice_track', 'failed', true),
  ('voice_track', 'ready', false);

INSERT INTO mdame.allowed_transitions (kind, from_state, to_state) VALUES
  ('publication', 'pending', 'failed'),
  ('publication', 'pending', 'uploading'),
  ('publication', 'uploading', 'failed'),
  ('publication', 'uploading', 'pending'),
  ('publication', 'uploading', 'published'),
  ('render', 'approved', 'failed'),
  ('render', 'rendered', 'approved'),
  ('render', 'rendered', 'failed'),
  ('render', 'rendered', 'rejected'),
  ('scene', 'planned', 'failed'),
  ('scene', 'planned', 'queued'),
  ('scene', 'planned', 'ready'),
  ('scene', 'queued', 'failed'),
  ('scene', 'queued', 'ready'),
  ('scene', 'ready', 'failed'),
  ('scene', 'ready', 'queued'),
  ('script', 'approved', 'failed'),
  ('script', 'approved', 'planned'),
  ('script', 'drafted', 'approved'),
  ('script', 'drafted', 'failed'),
  ('script', 'drafted', 'rejected'),
  ('script', 'halted', 'failed'),
  ('script', 'halted', 'voice_queued'),
  ('script', 'planned', 'failed'),
  ('script', 'planned', 'visuals_ready'),
  ('script', 'publishing', 'failed'),
  ('script', 'publishing', 'published'),
  ('script', 'publishing', 'voiced'),
  ('script', 'render_queued', 'failed'),
  ('script', 'render_queued', 'planned'),
  ('script', 'render_queued', 'rendered'),
  ('script', 'render_queued', 'visuals_ready'),
  ('script', 'rendered', 'failed'),
  ('script', 'rendered', 'publishing'),
  ('script', 'rendered', 'voiced'),
  ('script', 'visuals_ready', 'failed'),
  ('script', 'visuals_ready', 'planned'),
  ('script', 'visuals_ready', 'voice_queued'),
  ('script', 'voice_queued', 'failed'),
  ('script', 'voice_queued', 'halted'),
  ('script', 'voice_queued', 'planned'),
  ('script', 'voice_queued', 'voiced'),
  ('script', 'voiced', 'failed'),
  ('script', 'voiced', 'planned'),
  ('script', 'voiced', 'render_queued'),
  ('script', 'voiced', 'visuals_ready'),
  ('topic', 'approved', 'failed'),
  ('topic', 'approved', 'rejected'),
  ('topic', 'approved', 'scripted'),
  ('topic', 'candidate', 'approved'),
  ('topic', 'candidate', 'failed'),
  ('topic', 'candidate', 'rejected'),
  ('voice_track', 'ready', 'failed');

-- No grant is stored yet: the first one records the master key that wrapped it.
INSERT INTO mdame.master_keys (current_key_id) VALUES (NULL);
