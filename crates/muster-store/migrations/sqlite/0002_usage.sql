-- Resource-seconds per queue, for fair share and accounting.
CREATE TABLE usage (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    queue    TEXT NOT NULL,
    resource TEXT NOT NULL,
    at       INTEGER NOT NULL,
    amount   REAL NOT NULL
);
CREATE INDEX usage_by_time ON usage (at);
CREATE INDEX usage_by_queue ON usage (queue, at);
