-- Resource-seconds per queue, for fair share and accounting.
CREATE TABLE usage (
    id       BIGSERIAL PRIMARY KEY,
    queue    TEXT NOT NULL,
    resource TEXT NOT NULL,
    at       BIGINT NOT NULL,
    amount   DOUBLE PRECISION NOT NULL
);
CREATE INDEX usage_by_time ON usage (at);
CREATE INDEX usage_by_queue ON usage (queue, at);
