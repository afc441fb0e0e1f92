-- Every placement of a group that ended: what the group asked, when it was submitted, when it
-- started and ended, and how. Append-only; what-if replays (`muster history export`, then
-- `muster sim --history`) read it.
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    group_key     TEXT NOT NULL,
    queue         TEXT NOT NULL,
    priority      INTEGER NOT NULL,
    submitted_at  INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    ended_at      INTEGER NOT NULL,
    members       INTEGER NOT NULL,
    outcome       TEXT NOT NULL,
    request       TEXT NOT NULL
);
CREATE INDEX runs_by_end ON runs (ended_at);
