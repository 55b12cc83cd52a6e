-- Leases with fencing tokens. A row is never deleted, so a name's token only
-- grows: release sets expires_at to now and keeps owner and token.
CREATE TABLE IF NOT EXISTS coord_leases (
    name        text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 255),
    owner       text        NOT NULL,
    token       bigint      NOT NULL CHECK (token > 0),
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL
);

-- The highest fencing token seen per protected resource. Writes carrying an
-- older token are refused by a conditional update on this row.
CREATE TABLE IF NOT EXISTS coord_fences (
    resource   text        PRIMARY KEY CHECK (length(resource) BETWEEN 1 AND 255),
    fence      bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);
