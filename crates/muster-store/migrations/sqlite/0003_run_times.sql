-- How long groups that declared no run time held their nodes, by queue and request shape: the
-- engine plans such groups with the mean of the latest ones.
CREATE TABLE run_times (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    queue    TEXT NOT NULL,
    shape    INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    seconds  INTEGER NOT NULL
);
CREATE INDEX run_times_by_shape ON run_times (queue, shape, at);
