-- cipherfleet schema 1: hosts and their fact history, agent sessions,
-- campaigns, the job queue and benchmark results.
--
-- Enumerations are text with CHECK constraints (readable in psql and easy to
-- extend in a later migration); the Rust side mirrors them in src/db/.

-- A machine running an agent, identified by the name its agent reports.
CREATE TABLE hosts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name <> ''),
    -- Operator labels for campaign selectors, e.g. {"class": "storage-gen3"}.
    labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    first_seen timestamptz NOT NULL DEFAULT now(),
    last_seen timestamptz NOT NULL DEFAULT now(),
    -- The latest facts; foreign key added below (the tables reference each other).
    current_snapshot_id bigint
);

-- What a host's agent probed, one row per distinct set of facts: a new row
-- appears only when the facts change (new kernel, lost CPU flag, new agent),
-- so the history of a host is the list of its changes.
CREATE TABLE host_fact_snapshots (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    taken_at timestamptz NOT NULL DEFAULT now(),
    -- SHA-256 of the normalised facts (src/db/snapshots.rs), compared on every hello.
    facts_hash bytea NOT NULL CHECK (length(facts_hash) = 32),
    -- The normalised facts (`cipherfleet-agent probe --format json`, volatile fields removed).
    facts jsonb NOT NULL CHECK (jsonb_typeof(facts) = 'object'),
    -- Typed copies of the facts that reports filter and group by.
    arch text,
    cpu_vendor text,
    cpu_model_name text,
    cpu_family integer,
    cpu_model integer,
    cpu_stepping integer,
    logical_cores integer CHECK (logical_cores > 0),
    memory_total_bytes bigint CHECK (memory_total_bytes >= 0),
    os_name text,
    kernel_release text,
    -- CPUID hypervisor bit (x86) or a hypervisor named in sysfs.
    hypervisor_present boolean,
    -- Which hypervisor, when known (kvm, xen, hyperv, vmware, ...).
    hypervisor text,
    features_advertised text[] NOT NULL DEFAULT '{}',
    features_usable text[] NOT NULL DEFAULT '{}',
    build_flavour text,
    agent_version text
);
CREATE INDEX host_fact_snapshots_host_taken ON host_fact_snapshots (host_id, taken_at);

ALTER TABLE hosts
    ADD CONSTRAINT hosts_current_snapshot_fkey FOREIGN KEY (current_snapshot_id)
    REFERENCES host_fact_snapshots (id) ON DELETE SET NULL;

-- One connection of an agent; open while disconnected_at is null.
CREATE TABLE agent_sessions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    snapshot_id bigint REFERENCES host_fact_snapshots (id) ON DELETE SET NULL,
    connected_at timestamptz NOT NULL DEFAULT now(),
    disconnected_at timestamptz CHECK (disconnected_at >= connected_at),
    peer_address text,
    agent_version text
);
CREATE INDEX agent_sessions_host_connected ON agent_sessions (host_id, connected_at);
CREATE INDEX agent_sessions_open ON agent_sessions (host_id) WHERE disconnected_at IS NULL;

-- A suite run on the hosts a selector picked.
CREATE TABLE campaigns (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL CHECK (name <> ''),
    suite text NOT NULL,
    -- The expanded matrix and the host selector as the operator gave them.
    matrix jsonb NOT NULL,
    selector jsonb NOT NULL DEFAULT '{}',
    started_by text NOT NULL,
    status text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'finished', 'cancelled')),
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX campaigns_created ON campaigns (created_at);

-- One point of a campaign's matrix on one host: the scheduler's queue.
CREATE TABLE jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    campaign_id bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    -- Order within the campaign; the queue runs campaigns oldest first, then by position.
    position integer NOT NULL CHECK (position >= 0),
    -- The job as sent to the agent, plus typed copies of its dimensions.
    spec jsonb NOT NULL,
    algorithm text NOT NULL,
    direction text NOT NULL CHECK (direction IN ('encrypt', 'decrypt')),
    size_bytes bigint NOT NULL CHECK (size_bytes > 0),
    threads integer NOT NULL CHECK (threads > 0),
    concurrency integer CHECK (concurrency > 0),
    key_mode text NOT NULL CHECK (key_mode IN ('static', 'per-op', 'hkdf-per-user')),
    path text NOT NULL CHECK (path IN ('accelerated', 'software')),
    -- Wall time the job may take once assigned; sets `deadline`.
    time_limit_seconds double precision NOT NULL CHECK (time_limit_seconds > 0),
    status text NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    -- Runs lost with their agent; at 2 the job fails instead of being queued again.
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 2),
    created_at timestamptz NOT NULL DEFAULT now(),
    assigned_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    deadline timestamptz,
    error text,
    UNIQUE (campaign_id, position),
    CHECK (status <> 'running' OR (assigned_at IS NOT NULL AND deadline IS NOT NULL))
);
-- The scheduler's lookup: a host's queued (or running) jobs.
CREATE INDEX jobs_status_host ON jobs (status, host_id);
-- Jobs by campaign: served by the UNIQUE (campaign_id, position) index.
-- Benchmarks must not overlap on a host: at most one running job each, enforced here.
CREATE UNIQUE INDEX jobs_one_running_per_host ON jobs (host_id) WHERE status = 'running';

-- The measurement of a finished job; at most one per job, so a result the
-- agent sends twice (reconnect, retry) is stored once.
CREATE TABLE results (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL UNIQUE REFERENCES jobs (id) ON DELETE CASCADE,
    host_id bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    -- The host's facts when the result arrived.
    snapshot_id bigint REFERENCES host_fact_snapshots (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The point, copied from the job so that comparisons need no join.
    algorithm text NOT NULL,
    direction text NOT NULL,
    size_bytes bigint NOT NULL,
    threads integer NOT NULL,
    concurrency integer,
    key_mode text NOT NULL,
    path text NOT NULL,
    -- What the worker really ran: a requested accelerated path can fall back.
    path_used text NOT NULL CHECK (path_used IN ('accelerated', 'software')),
    throughput_mb_s double precision NOT NULL CHECK (throughput_mb_s >= 0),
    ops_per_s double precision NOT NULL CHECK (ops_per_s >= 0),
    latency_p50_ns bigint NOT NULL CHECK (latency_p50_ns >= 0),
    latency_p90_ns bigint NOT NULL CHECK (latency_p90_ns >= 0),
    latency_p99_ns bigint NOT NULL CHECK (latency_p99_ns >= 0),
    latency_p999_ns bigint NOT NULL CHECK (latency_p999_ns >= 0),
    latency_max_ns bigint NOT NULL CHECK (latency_max_ns >= 0),
    latency_method text NOT NULL CHECK (latency_method IN ('per-op', 'batch-mean', 'per-object')),
    batch_ops bigint NOT NULL CHECK (batch_ops >= 0),
    cv double precision CHECK (cv >= 0),
    samples integer NOT NULL CHECK (samples >= 0),
    cpu_user_seconds double precision NOT NULL CHECK (cpu_user_seconds >= 0),
    cpu_sys_seconds double precision NOT NULL CHECK (cpu_sys_seconds >= 0),
    cpu_utilization double precision NOT NULL CHECK (cpu_utilization >= 0),
    key_setup_ns double precision NOT NULL CHECK (key_setup_ns >= 0),
    elapsed_seconds double precision NOT NULL CHECK (elapsed_seconds >= 0),
    sample_throughputs double precision[] NOT NULL DEFAULT '{}'
        CHECK (0 <= ALL (sample_throughputs)),
    -- The whole measurement as the agent reported it (schema cipherfleet.measurement/1).
    measurement jsonb NOT NULL
);
-- Comparisons and history of one point on one host.
CREATE INDEX results_point ON results (host_id, algorithm, size_bytes, direction, path);
CREATE INDEX results_created ON results (created_at);
