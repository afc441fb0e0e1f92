-- Groups, their allocations, their history, and the leader leases.
CREATE TABLE groups (
    key           TEXT PRIMARY KEY,
    queue         TEXT NOT NULL,
    priority      BIGINT NOT NULL,
    submitted_at  BIGINT NOT NULL,
    seq           BIGINT NOT NULL UNIQUE,
    state         TEXT NOT NULL,
    spec          JSONB NOT NULL,
    status        JSONB NOT NULL,
    requeue_count BIGINT NOT NULL,
    requeue_at    BIGINT,
    version       BIGINT NOT NULL
);

CREATE SEQUENCE group_seq;

CREATE TABLE allocations (
    group_key TEXT PRIMARY KEY REFERENCES groups (key) ON DELETE CASCADE,
    alloc_id  BIGINT NOT NULL UNIQUE,
    placement JSONB NOT NULL,
    start_at  BIGINT NOT NULL,
    end_at    BIGINT
);

CREATE TABLE history (
    id         BIGSERIAL PRIMARY KEY,
    group_key  TEXT NOT NULL,
    at         BIGINT NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL,
    message    TEXT NOT NULL
);
CREATE INDEX history_by_group ON history (group_key, id);

CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
