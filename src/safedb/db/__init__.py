"""Database backends behind one protocol (`safedb.db.backend.Database`)."""
