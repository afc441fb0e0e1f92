-- How long groups that declared no run time held their nodes, by queue and request shape: the
-- engine plans such groups with the mean of the latest ones.
CREATE TABLE run_times (
    id       BIGSERIAL PRIMARY KEY,
    queue    TEXT NOT NULL,
    shape    BIGINT NOT NULL,
    at       BIGINT NOT NULL,
    seconds  BIGINT NOT NULL
);
CREATE INDEX run_times_by_shape ON run_times (queue, shape, at);
