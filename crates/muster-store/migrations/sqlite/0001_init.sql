-- Groups, their allocations, their history, and the leader leases.
CREATE TABLE groups (
    key           TEXT PRIMARY KEY,
    queue         TEXT NOT NULL,
    priority      INTEGER NOT NULL,
    submitted_at  INTEGER NOT NULL,
    seq           INTEGER NOT NULL UNIQUE,
    state         TEXT NOT NULL,
    spec          TEXT NOT NULL,
    status        TEXT NOT NULL,
    requeue_count INTEGER NOT NULL,
    requeue_at    INTEGER,
    version       INTEGER NOT NULL
);

-- SQLite has no sequences; seq must never be reused, even after the newest group is deleted.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('group_seq', 0);

CREATE TABLE allocations (
    group_key TEXT PRIMARY KEY REFERENCES groups (key) ON DELETE CASCADE,
    alloc_id  INTEGER NOT NULL UNIQUE,
    placement TEXT NOT NULL,
    start_at  INTEGER NOT NULL,
    end_at    INTEGER
);

CREATE TABLE history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    group_key  TEXT NOT NULL,
    at         INTEGER NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL,
    message    TEXT NOT NULL
);
CREATE INDEX history_by_group ON history (group_key, id);

CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
