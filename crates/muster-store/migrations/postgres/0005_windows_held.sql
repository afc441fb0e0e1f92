-- The nodes each window of a calendar reservation holds its room on: after a restart the window
-- is made again on them, with its users' work inside it as before.
CREATE TABLE windows_held (
    reservation   TEXT NOT NULL,
    window_start  BIGINT NOT NULL,
    window_end    BIGINT NOT NULL,
    nodes         JSONB NOT NULL,
    PRIMARY KEY (reservation, window_start)
);
