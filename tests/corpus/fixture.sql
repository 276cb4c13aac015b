-- The database every SQLite corpus case runs against (tests/corpus/sqlite/*.toml).
-- Built by tests/corpus/fixture.py into a fresh file; the runner copies it per server or per case.

PRAGMA user_version = 42;
PRAGMA application_id = 1396786242;

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL DEFAULT 'member',
    delete_flag INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE invoices (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    status TEXT NOT NULL CHECK (status IN ('draft', 'sent', 'paid', 'void')),
    issued_at TEXT NOT NULL,
    updated_at TEXT
);

-- AUTOINCREMENT: inserts write sqlite_sequence as well.
CREATE TABLE dropped_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_name TEXT NOT NULL,
    delete_flag INTEGER NOT NULL DEFAULT 0,
    dropped_by INTEGER REFERENCES users(id),
    updated_at TEXT
);

CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT NOT NULL,
    action TEXT NOT NULL,
    row_id INTEGER,
    note TEXT
);

-- Keywords as identifiers.
CREATE TABLE "delete" (id INTEGER PRIMARY KEY, "update" TEXT, "drop" TEXT, "insert" INTEGER);

CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;

CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, payload TEXT NOT NULL);

CREATE TABLE categories (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES categories(id), name TEXT NOT NULL);

-- A table without rows, for ANALYZE and friends.
CREATE TABLE empty_table (id INTEGER PRIMARY KEY, label TEXT);

CREATE INDEX invoices_user ON invoices(user_id);
CREATE UNIQUE INDEX users_email_lower ON users(lower(email));
CREATE INDEX invoices_open ON invoices(status) WHERE status <> 'paid';
CREATE INDEX dropped_items_flag ON dropped_items(delete_flag, updated_at);

CREATE VIEW open_invoices AS
    SELECT i.id, u.name, i.amount_cents, i.status FROM invoices AS i JOIN users AS u ON u.id = i.user_id
    WHERE i.status IN ('draft', 'sent');

-- A view that accepts writes through INSTEAD OF triggers (created at the end, after the rows).
CREATE VIEW user_directory AS SELECT id, name, email FROM users WHERE delete_flag = 0;

CREATE VIRTUAL TABLE notes_fts USING fts5(title, body);
CREATE VIRTUAL TABLE zones USING rtree(id, min_x, max_x, min_y, max_y);

INSERT INTO users (id, name, email, role, delete_flag, updated_at, created_at) VALUES
    (1, 'Ada Lovelace', 'ada@example.com', 'admin', 0, NULL, '2025-01-14'),
    (2, 'Grace Hopper', 'grace@example.com', 'member', 0, '2025-06-01', '2025-02-03'),
    (3, 'Alan Turing', 'alan@example.com', 'member', 0, NULL, '2025-03-21'),
    (4, 'Katherine Johnson', 'katherine@example.com', 'member', 1, '2025-07-01', '2025-04-08'),
    (5, 'Edsger Dijkstra', 'edsger@example.com', 'member', 0, NULL, '2025-05-30'),
    (6, 'Robert''); DROP TABLE users;--', 'bobby@example.com', 'member', 0, NULL, '2025-06-15');

INSERT INTO invoices (id, user_id, amount_cents, status, issued_at, updated_at) VALUES
    (1, 1, 12000, 'paid', '2025-06-01', NULL),
    (2, 2, 4550, 'paid', '2025-06-03', NULL),
    (3, 2, 9900, 'sent', '2025-07-11', '2025-07-12'),
    (4, 3, 250000, 'draft', '2025-07-19', NULL),
    (5, 4, 1875, 'paid', '2025-08-02', NULL),
    (6, 5, 64000, 'sent', '2025-08-15', NULL),
    (7, 1, 3300, 'void', '2025-09-01', '2025-09-02'),
    (8, 3, 15000, 'paid', '2025-09-09', NULL);

INSERT INTO dropped_items (item_name, delete_flag, dropped_by, updated_at) VALUES
    ('DROP TABLE users', 1, 1, '2025-10-01'),
    ('stapler', 0, 2, NULL),
    ('DELETE FROM invoices', 1, 3, '2025-10-03');

INSERT INTO "delete" (id, "update", "drop", "insert") VALUES (1, 'UPDATE users SET role = ''admin''', 'no', 0);

INSERT INTO settings (key, value) VALUES ('theme', 'dark'), ('truncate_logs', 'weekly'), ('alter_mode', 'off');

INSERT INTO events (id, kind, payload) VALUES
    (1, 'signup', '{"user": 1, "tags": ["new", "drop"], "sql": "DELETE FROM users"}'),
    (2, 'invoice', '{"user": 2, "amount": 4550, "tags": []}'),
    (3, 'update', '{"user": 3, "changes": {"role": "member"}}');

INSERT INTO categories (id, parent_id, name) VALUES
    (1, NULL, 'root'), (2, 1, 'hardware'), (3, 1, 'software'), (4, 3, 'databases'), (5, 4, 'sqlite');

INSERT INTO audit_log (table_name, action, row_id, note) VALUES ('users', 'create', 1, 'seed');

INSERT INTO notes_fts (title, body) VALUES
    ('migration', 'We will DROP TABLE legacy_users after the UPDATE runs'),
    ('cleanup', 'delete_flag marks rows for deletion'),
    ('welcome', 'hello world');

INSERT INTO zones (id, min_x, max_x, min_y, max_y) VALUES (1, 0, 10, 0, 10), (2, 5, 15, 5, 15);

-- Triggers come after the rows, so the rows above are exactly as written.
CREATE TRIGGER user_directory_insert INSTEAD OF INSERT ON user_directory
BEGIN
    INSERT INTO users (name, email, created_at) VALUES (NEW.name, NEW.email, '2026-01-01');
END;

CREATE TRIGGER user_directory_update INSTEAD OF UPDATE ON user_directory
BEGIN
    UPDATE users SET name = NEW.name, email = NEW.email, updated_at = '2026-01-01' WHERE id = OLD.id;
END;

CREATE TRIGGER user_directory_delete INSTEAD OF DELETE ON user_directory
BEGIN
    UPDATE users SET delete_flag = 1, updated_at = '2026-01-01' WHERE id = OLD.id;
END;

-- Triggers that write another table.
CREATE TRIGGER invoices_audit_update AFTER UPDATE ON invoices
BEGIN
    INSERT INTO audit_log (table_name, action, row_id, note) VALUES ('invoices', 'update', NEW.id, OLD.status);
END;

CREATE TRIGGER invoices_audit_delete AFTER DELETE ON invoices
BEGIN
    INSERT INTO audit_log (table_name, action, row_id, note) VALUES ('invoices', 'delete', OLD.id, NULL);
END;

CREATE TRIGGER dropped_items_touch_user AFTER INSERT ON dropped_items
BEGIN
    UPDATE users SET updated_at = '2026-01-01' WHERE id = NEW.dropped_by;
END;

ANALYZE;
