-- The database every PostgreSQL corpus case runs against (tests/corpus/postgres/*.toml).
-- Run as the writer role (safedb_writer), which owns the database; the reader role gets SELECT.

CREATE SCHEMA billing;
GRANT USAGE ON SCHEMA billing TO safedb_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA billing GRANT SELECT ON TABLES TO safedb_reader;

CREATE TABLE users (
    id serial PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL UNIQUE,
    role text NOT NULL DEFAULT 'member',
    "drop" boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT '2024-01-01 00:00:00+00'
);
INSERT INTO users (name, email, role) VALUES
    ('Ada Lovelace', 'ada@example.com', 'admin'),
    ('Grace Hopper', 'grace@example.com', 'member'),
    ('Linus Torvalds', 'linus@example.com', 'member'),
    ('Robert''); DROP TABLE users;--', 'bobby@example.com', 'member');

CREATE TABLE invoices (
    id integer PRIMARY KEY,
    user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    amount_cents integer NOT NULL CHECK (amount_cents >= 0),
    status text NOT NULL
);
INSERT INTO invoices VALUES (1, 1, 1200, 'paid'), (2, 1, 500, 'sent'), (3, 2, 9900, 'draft'), (4, 3, 0, 'void');

CREATE TABLE "select" ("from" text, "where" integer);
INSERT INTO "select" VALUES ('DELETE FROM users', 1), ('TRUNCATE invoices', 2);

CREATE TABLE audit_log (id bigserial PRIMARY KEY, message text NOT NULL);
CREATE TABLE events (id integer PRIMARY KEY, kind text NOT NULL, payload jsonb);
INSERT INTO events VALUES (1, 'login', '{"drop": "table"}'), (2, 'logout', '{"n": 2}');

CREATE FUNCTION log_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_log (message) VALUES (TG_OP || ' on events');
    RETURN NULL;
END $$;
CREATE TRIGGER events_logged AFTER INSERT OR UPDATE OR DELETE ON events FOR EACH ROW EXECUTE FUNCTION log_event();

CREATE TABLE billing.plans (code text PRIMARY KEY, price_cents integer NOT NULL);
INSERT INTO billing.plans VALUES ('free', 0), ('pro', 2000);

CREATE SEQUENCE ticket_seq START 10;

CREATE FUNCTION bump_counter() RETURNS bigint LANGUAGE sql VOLATILE AS
    $$ INSERT INTO audit_log (message) VALUES ('bumped') RETURNING id $$;
CREATE FUNCTION total_cents() RETURNS bigint LANGUAGE sql STABLE AS $$ SELECT sum(amount_cents) FROM invoices $$;
CREATE FUNCTION double_it(integer) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT $1 * 2 $$;
CREATE FUNCTION stamp(integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS
    $$ BEGIN INSERT INTO audit_log (message) VALUES ('stamped ' || $1); RETURN $1; END $$;
CREATE PROCEDURE archive_users() LANGUAGE sql AS $$ DELETE FROM users WHERE role = 'member' $$;

CREATE VIEW active_users AS SELECT id, name FROM users WHERE NOT "drop";
CREATE VIEW stamped_users AS SELECT stamp(id) AS id, name FROM users;
CREATE VIEW over_stamped AS SELECT * FROM stamped_users;
CREATE MATERIALIZED VIEW user_counts AS SELECT role, count(*) AS n FROM users GROUP BY role;
GRANT SELECT ON user_counts TO safedb_reader;
