-- Every placement of a group that ended: what the group asked, when it was submitted, when it
-- started and ended, and how. Append-only; what-if replays (`muster history export`, then
-- `muster sim --history`) read it.
CREATE TABLE runs (
    id            BIGSERIAL PRIMARY KEY,
    group_key     TEXT NOT NULL,
    queue         TEXT NOT NULL,
    priority      BIGINT NOT NULL,
    submitted_at  BIGINT NOT NULL,
    started_at    BIGINT NOT NULL,
    ended_at      BIGINT NOT NULL,
    members       BIGINT NOT NULL,
    outcome       TEXT NOT NULL,
    request       JSONB NOT NULL
);
CREATE INDEX runs_by_end ON runs (ended_at);
