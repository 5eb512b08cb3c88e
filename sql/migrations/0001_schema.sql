-- 0001: the mdame schema, its tables and the privilege model.
--
-- Run by mdame_core.migrate inside one transaction, connected as the owner role (mdame_owner on
-- the local cluster). The owner owns every object; the application role (mdame_app) may only
-- SELECT tables and EXECUTE functions. Every state change goes through a SECURITY DEFINER
-- function (0002_rpcs.sql), so the app cannot do read-modify-write on state rows.
--
-- Conventions: money is bigint micro-units; timestamps are timestamptz; every table that a retry
-- could create twice carries a UNIQUE idempotency key.

SET LOCAL client_min_messages = warning;

CREATE SCHEMA IF NOT EXISTS mdame;

-- The application role normally exists (scripts/db-local.sh creates it); on an external database
-- create it here so grants below resolve. The owner must be a member to SET ROLE mdame_app.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mdame_app') THEN
    CREATE ROLE mdame_app NOLOGIN;
    EXECUTE format('GRANT mdame_app TO %I', current_user);
  END IF;
END
$$;

-- Privileges, stated once for everything this role creates now and in later migrations:
-- PUBLIC gets nothing (the PostgreSQL default grants EXECUTE on functions to PUBLIC; revoking
-- that default only works globally, not per schema), the app reads and calls, nothing more.
REVOKE ALL ON SCHEMA mdame FROM PUBLIC;
GRANT USAGE ON SCHEMA mdame TO mdame_app;
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame
  GRANT EXECUTE ON FUNCTIONS TO mdame_app;
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA mdame
  GRANT SELECT ON TABLES TO mdame_app;

SET LOCAL search_path = mdame, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- Environment guard: the database belongs to exactly one ENV, recorded by the first migrate.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE environment (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  env         text NOT NULL CHECK (env IN ('dev', 'prod')),
  recorded_at timestamptz NOT NULL DEFAULT now()
);

-- Once recorded the ENV never changes: a dev database must not silently become prod.
CREATE FUNCTION mdame.environment_is_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'MD001',
    MESSAGE = 'mdame: the database environment is recorded once and never changed';
END
$$;

CREATE TRIGGER environment_is_immutable
  BEFORE UPDATE OR DELETE ON environment
  FOR EACH ROW EXECUTE FUNCTION environment_is_immutable();

-- ---------------------------------------------------------------------------------------------
-- Work kinds, their states and the allowed transitions (the state machine is data).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE work_kinds (
  kind          text PRIMARY KEY CHECK (kind ~ '^[a-z][a-z_]{0,40}$'),
  table_name    text NOT NULL UNIQUE,
  initial_state text NOT NULL
);

CREATE TABLE work_states (
  kind        text NOT NULL REFERENCES work_kinds (kind),
  state       text NOT NULL CHECK (state ~ '^[a-z][a-z_]{0,40}$'),
  is_terminal boolean NOT NULL,
  PRIMARY KEY (kind, state)
);

-- Circular with work_states: checked at commit so both can be seeded in one migration.
ALTER TABLE work_kinds
  ADD CONSTRAINT work_kinds_initial_state_fkey FOREIGN KEY (kind, initial_state)
  REFERENCES work_states (kind, state) DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE allowed_transitions (
  kind       text NOT NULL,
  from_state text NOT NULL,
  to_state   text NOT NULL,
  PRIMARY KEY (kind, from_state, to_state),
  FOREIGN KEY (kind, from_state) REFERENCES work_states (kind, state),
  FOREIGN KEY (kind, to_state) REFERENCES work_states (kind, state),
  -- Re-entering the current state is never a transition: the caller re-reads instead.
  CHECK (from_state <> to_state)
);

INSERT INTO work_kinds (kind, table_name, initial_state) VALUES
  ('trend',       'trends',       'scored'),
  ('topic',       'topics',       'candidate'),
  ('script',      'scripts',      'drafted'),
  ('scene',       'scenes',       'planned'),
  ('voice_track', 'voice_tracks', 'ready'),
  ('render',      'renders',      'rendered'),
  ('publication', 'publications', 'pending');

INSERT INTO work_states (kind, state, is_terminal) VALUES
  ('trend', 'scored', true),
  ('trend', 'failed', true),
  ('topic', 'candidate', false),
  ('topic', 'approved', false),
  ('topic', 'scripted', true),
  ('topic', 'rejected', true),
  ('topic', 'failed', true),
  ('script', 'drafted', false),
  ('script', 'approved', false),
  ('script', 'planned', false),
  ('script', 'visuals_ready', false),
  ('script', 'voice_queued', false),
  ('script', 'voiced', false),
  ('script', 'render_queued', false),
  ('script', 'rendered', false),
  ('script', 'publishing', false),
  ('script', 'published', true),
  ('script', 'rejected', true),
  ('script', 'halted', true),
  ('script', 'failed', true),
  ('scene', 'planned', false),
  ('scene', 'queued', false),
  ('scene', 'ready', true),
  ('scene', 'failed', true),
  ('voice_track', 'ready', true),
  ('voice_track', 'failed', true),
  ('render', 'rendered', false),
  ('render', 'approved', true),
  ('render', 'rejected', true),
  ('render', 'failed', true),
  ('publication', 'pending', false),
  ('publication', 'uploading', false),
  ('publication', 'published', true),
  ('publication', 'failed', true);

INSERT INTO allowed_transitions (kind, from_state, to_state) VALUES
  ('topic', 'candidate', 'approved'),
  ('topic', 'candidate', 'rejected'),
  ('topic', 'approved', 'scripted'),
  ('topic', 'approved', 'rejected'),
  ('script', 'drafted', 'approved'),
  ('script', 'drafted', 'rejected'),
  ('script', 'approved', 'planned'),
  ('script', 'planned', 'visuals_ready'),
  ('script', 'visuals_ready', 'voice_queued'),
  ('script', 'voice_queued', 'voiced'),
  ('script', 'voice_queued', 'halted'),
  ('script', 'voiced', 'render_queued'),
  ('script', 'render_queued', 'rendered'),
  ('script', 'rendered', 'publishing'),
  ('script', 'publishing', 'published'),
  ('scene', 'planned', 'queued'),
  ('scene', 'queued', 'ready'),
  ('scene', 'planned', 'ready'),          -- scene cache hit
  ('render', 'rendered', 'approved'),
  ('render', 'rendered', 'rejected'),
  ('publication', 'pending', 'uploading'),
  ('publication', 'uploading', 'published'),
  ('publication', 'uploading', 'pending'); -- reconciled as not uploaded: try again

-- Any non-terminal state may fail. A later migration that adds a non-terminal state adds its
-- '-> failed' row the same way.
INSERT INTO allowed_transitions (kind, from_state, to_state)
SELECT s.kind, s.state, 'failed'
FROM work_states s
WHERE NOT s.is_terminal
  AND EXISTS (SELECT FROM work_states f WHERE f.kind = s.kind AND f.state = 'failed');

-- ---------------------------------------------------------------------------------------------
-- Dimensions (content niches) and their publishing accounts.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE dimensions (
  id         bigserial PRIMARY KEY,
  slug       text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  title      text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  config     jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  active     boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dimension_accounts (
  id                bigserial PRIMARY KEY,
  dimension_id      bigint NOT NULL REFERENCES dimensions (id),
  platform          text NOT NULL CHECK (platform ~ '^[a-z][a-z0-9_]{0,39}$'),
  handle            text NOT NULL CHECK (length(handle) BETWEEN 1 AND 200),
  daily_quota_units integer NOT NULL CHECK (daily_quota_units >= 0),
  active            boolean NOT NULL DEFAULT true,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  -- An account belongs to one dimension, so its quota is counted once.
  UNIQUE (platform, handle)
);

-- ---------------------------------------------------------------------------------------------
-- Runs and locks.
-- ---------------------------------------------------------------------------------------------
-- Fencing tokens: one sequence for all locks, so a token is strictly greater than every token
-- handed out before it.
CREATE SEQUENCE lock_tokens;

-- A lock is free once released_at is set or expires_at has passed; holder and token describe
-- the last holder, so a retried release of the same token is recognised as already done.
CREATE TABLE system_locks (
  lock_name    text PRIMARY KEY CHECK (length(lock_name) BETWEEN 1 AND 200),
  holder       text NOT NULL CHECK (length(holder) BETWEEN 1 AND 200),
  token        bigint NOT NULL,
  ttl_seconds  integer NOT NULL CHECK (ttl_seconds > 0),
  acquired_at  timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL,
  released_at  timestamptz
);

CREATE TABLE pipeline_runs (
  id            bigserial PRIMARY KEY,
  execution_id  uuid NOT NULL UNIQUE,
  dimension_id  bigint REFERENCES dimensions (id),
  partition_key text NOT NULL CHECK (length(partition_key) BETWEEN 1 AND 200),
  lock_token    bigint,
  status        text NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'succeeded', 'failed', 'cancelled')),
  detail        jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
  started_at    timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz,
  CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX pipeline_runs_dimension_idx ON pipeline_runs (dimension_id, started_at);

-- ---------------------------------------------------------------------------------------------
-- Work units. They share: id, kind (constant, so (kind, state) can reference work_states),
-- idempotency_key, state, payload (the immutable input), result (merged by transitions),
-- attempts, created_at, updated_at; plus natural foreign keys that upsert_work_unit fills from
-- the payload keys of the same name.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE trends (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'trend' CHECK (kind = 'trend'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  dimension_id    bigint NOT NULL REFERENCES dimensions (id),
  partition_date  date NOT NULL,
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state)
);
CREATE INDEX trends_dimension_date_idx ON trends (dimension_id, partition_date);

CREATE TABLE topics (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'topic' CHECK (kind = 'topic'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  dimension_id    bigint NOT NULL REFERENCES dimensions (id),
  partition_date  date NOT NULL,
  trend_id        bigint REFERENCES trends (id),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state)
);
CREATE INDEX topics_dimension_date_idx ON topics (dimension_id, partition_date);

CREATE TABLE scripts (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'script' CHECK (kind = 'script'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  dimension_id    bigint NOT NULL REFERENCES dimensions (id),
  partition_date  date NOT NULL,
  topic_id        bigint NOT NULL REFERENCES topics (id),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state)
);
CREATE INDEX scripts_dimension_date_idx ON scripts (dimension_id, partition_date);
CREATE INDEX scripts_topic_idx ON scripts (topic_id);

CREATE TABLE scenes (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'scene' CHECK (kind = 'scene'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  script_id       bigint NOT NULL REFERENCES scripts (id),
  scene_index     integer NOT NULL CHECK (scene_index >= 0),
  scene_hash      text NOT NULL CHECK (length(scene_hash) BETWEEN 1 AND 128),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state),
  UNIQUE (script_id, scene_index)
);
CREATE INDEX scenes_hash_idx ON scenes (scene_hash);

CREATE TABLE voice_tracks (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'voice_track' CHECK (kind = 'voice_track'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  script_id       bigint NOT NULL REFERENCES scripts (id),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state)
);
CREATE INDEX voice_tracks_script_idx ON voice_tracks (script_id);

CREATE TABLE renders (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'render' CHECK (kind = 'render'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  script_id       bigint NOT NULL REFERENCES scripts (id),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state)
);
CREATE INDEX renders_script_idx ON renders (script_id);

CREATE TABLE publications (
  id              bigserial PRIMARY KEY,
  kind            text NOT NULL DEFAULT 'publication' CHECK (kind = 'publication'),
  idempotency_key text NOT NULL UNIQUE,
  state           text NOT NULL,
  payload         jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  script_id       bigint NOT NULL REFERENCES scripts (id),
  render_id       bigint NOT NULL REFERENCES renders (id),
  account_id      bigint NOT NULL REFERENCES dimension_accounts (id),
  FOREIGN KEY (kind, state) REFERENCES work_states (kind, state),
  -- No duplicate video: one publication of a script per account, whatever the key says.
  UNIQUE (script_id, account_id)
);
CREATE INDEX publications_render_idx ON publications (render_id);

-- ---------------------------------------------------------------------------------------------
-- Job queue (GPU scene jobs and the like): claimed with FOR UPDATE SKIP LOCKED under a lease.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  job_type         text NOT NULL CHECK (job_type ~ '^[a-z][a-z0-9_.-]{0,62}$'),
  idempotency_key  text NOT NULL UNIQUE,
  payload          jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
  result           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(result) = 'object'),
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'dead')),
  priority         integer NOT NULL DEFAULT 100,
  run_after        timestamptz NOT NULL DEFAULT now(),
  attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  max_attempts     integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
  lease_owner      text,
  lease_expires_at timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz,
  CHECK (attempt <= max_attempts),
  -- A lease exists exactly while the job runs; lease_owner stays as the last worker once the job
  -- is finished (so a retried complete_job is recognised) and is cleared when it is requeued.
  CHECK ((state = 'running') = (lease_expires_at IS NOT NULL)),
  CHECK (state <> 'running' OR lease_owner IS NOT NULL),
  CHECK ((state IN ('succeeded', 'failed', 'dead')) = (finished_at IS NOT NULL))
);
-- Partial indexes: claim and reap only ever look at queued / running rows, so finished jobs
-- (the vast majority over time) are never walked.
CREATE INDEX jobs_queued_idx ON jobs (job_type, priority, id) WHERE state = 'queued';
CREATE INDEX jobs_running_lease_idx ON jobs (lease_expires_at) WHERE state = 'running';

-- ---------------------------------------------------------------------------------------------
-- Scene cache: generated clips addressed by scene_hash, valid until expires_at.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE scene_cache (
  scene_hash     text PRIMARY KEY CHECK (length(scene_hash) BETWEEN 1 AND 128),
  uri            text NOT NULL CHECK (length(uri) BETWEEN 1 AND 2000),
  content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL
);

-- ---------------------------------------------------------------------------------------------
-- Reviews, bound to the reviewed file's SHA-256.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE reviews (
  id             bigserial PRIMARY KEY,
  render_id      bigint NOT NULL REFERENCES renders (id),
  content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
  check_name     text NOT NULL CHECK (check_name ~ '^[a-z][a-z0-9_.-]{0,62}$'),
  verdict        text NOT NULL CHECK (verdict IN ('approved', 'rejected')),
  detail         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reviews_render_idx ON reviews (render_id, id);

-- ---------------------------------------------------------------------------------------------
-- Quotas (per account and day, capped by dimension_accounts.daily_quota_units).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE quota_ledger (
  id         bigserial PRIMARY KEY,
  account_id bigint NOT NULL REFERENCES dimension_accounts (id),
  day        date NOT NULL,
  quota_key  text NOT NULL UNIQUE CHECK (length(quota_key) BETWEEN 1 AND 512),
  units      integer NOT NULL CHECK (units > 0),
  state      text NOT NULL DEFAULT 'reserved' CHECK (state IN ('reserved', 'committed', 'released')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quota_ledger_account_day_idx ON quota_ledger (account_id, day);

-- ---------------------------------------------------------------------------------------------
-- Budgets: a cap per (scope, period) and ledger entries keyed by attempt_key.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE budget_caps (
  scope      text NOT NULL CHECK (scope ~ '^[A-Za-z0-9][A-Za-z0-9:._/-]{0,199}$'),
  period     text NOT NULL CHECK (period ~ '^[A-Za-z0-9][A-Za-z0-9:._-]{0,63}$'),
  cap_micros bigint NOT NULL CHECK (cap_micros >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, period)
);

CREATE TABLE budget_ledger (
  id              bigserial PRIMARY KEY,
  scope           text NOT NULL,
  period          text NOT NULL,
  attempt_key     text NOT NULL UNIQUE CHECK (length(attempt_key) BETWEEN 1 AND 512),
  state           text NOT NULL DEFAULT 'reserved' CHECK (state IN ('reserved', 'settled', 'released')),
  reserved_micros bigint NOT NULL CHECK (reserved_micros >= 0),
  actual_micros   bigint CHECK (actual_micros >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (scope, period) REFERENCES budget_caps (scope, period),
  CHECK ((state = 'settled') = (actual_micros IS NOT NULL))
);
CREATE INDEX budget_ledger_scope_period_idx ON budget_ledger (scope, period);

-- What counts against a cap: open reservations at their reserved amount, settled entries at
-- their actual amount, released entries not at all.
CREATE VIEW budget_usage AS
SELECT c.scope, c.period, c.cap_micros,
       coalesce(sum(l.reserved_micros) FILTER (WHERE l.state = 'reserved'), 0)::bigint
         AS reserved_micros,
       coalesce(sum(l.actual_micros) FILTER (WHERE l.state = 'settled'), 0)::bigint
         AS settled_micros
FROM budget_caps c
LEFT JOIN budget_ledger l ON l.scope = c.scope AND l.period = c.period
GROUP BY c.scope, c.period, c.cap_micros;

CREATE VIEW quota_usage AS
SELECT l.account_id, l.day, a.daily_quota_units AS cap_units,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'reserved'), 0)::bigint AS reserved_units,
       coalesce(sum(l.units) FILTER (WHERE l.state = 'committed'), 0)::bigint AS committed_units
FROM quota_ledger l
JOIN dimension_accounts a ON a.id = l.account_id
GROUP BY l.account_id, l.day, a.daily_quota_units;

-- ---------------------------------------------------------------------------------------------
-- Provider attempts: every external call, numbered per work key across prompt revisions.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE provider_attempts (
  id           bigserial PRIMARY KEY,
  work_key     text NOT NULL CHECK (length(work_key) BETWEEN 1 AND 512),
  attempt_no   integer NOT NULL CHECK (attempt_no >= 1),
  provider     text NOT NULL CHECK (length(provider) BETWEEN 1 AND 100),
  request_hash text NOT NULL CHECK (length(request_hash) BETWEEN 1 AND 128),
  status       text NOT NULL CHECK (status IN ('submitted', 'unknown', 'succeeded', 'failed')),
  detail       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (work_key, attempt_no)
);

-- ---------------------------------------------------------------------------------------------
-- Safety decisions (an append-only audit trail).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE safety_audit_logs (
  id           bigserial PRIMARY KEY,
  subject_kind text NOT NULL CHECK (subject_kind ~ '^[a-z][a-z_]{0,40}$'),
  subject_key  text NOT NULL CHECK (length(subject_key) BETWEEN 1 AND 512),
  dimension_id bigint REFERENCES dimensions (id),
  verdict      text NOT NULL CHECK (verdict IN ('allow', 'review', 'block')),
  rule         text NOT NULL CHECK (length(rule) BETWEEN 1 AND 200),
  reasons      jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(reasons) = 'array'),
  classifier   text NOT NULL CHECK (length(classifier) BETWEEN 1 AND 200),
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX safety_audit_logs_subject_idx ON safety_audit_logs (subject_kind, subject_key);

-- ---------------------------------------------------------------------------------------------
-- Events: the append-only history of work units (created, transitions, attempts) and of
-- operationally interesting job/lock/run changes.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE events (
  id           bigserial PRIMARY KEY,
  subject_kind text NOT NULL,
  subject_id   bigint NOT NULL,
  event        text NOT NULL,
  from_state   text,
  to_state     text,
  detail       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_subject_idx ON events (subject_kind, subject_id, id);

-- The bootstrap table of the migration runner predates the default privileges above.
GRANT SELECT ON ALL TABLES IN SCHEMA mdame TO mdame_app;
