"""A real, throwaway PostgreSQL server for the tests: `initdb` + `pg_ctl` in a temporary directory.

The server listens on 127.0.0.1 only, on a free port, with its unix socket inside the temporary
directory. Run as root, the binaries run as the `postgres` OS user (PostgreSQL refuses to run as
root); otherwise they run as the current user. Two login roles are made for SafeDB:

    safedb_reader   SELECT only, `default_transaction_read_only = on` (the read path)
    safedb_writer   owns the test databases (the path for approved statements)

`docs/postgres.md` describes the same two roles for a real deployment.
"""

from __future__ import annotations

import glob
import logging
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

logger = logging.getLogger(__name__)

READER = "safedb_reader"
WRITER = "safedb_writer"
SUPERUSER = "postgres"
_START_SECONDS = 60
_RUN_AS_OS_USER = "postgres"


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries are not installed on this machine."""


def find_binaries() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: from PATH, else the newest /usr/lib/postgresql/*/bin."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(os.path.realpath(initdb)).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name or 0)
    )
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """One running server; `stop()` (or the `postgres_server()` context manager) always shuts it down."""

    bin_dir: Path
    directory: Path
    port: int
    passwords: dict[str, str]

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def url(self, role: str, database: str = "postgres") -> str:
        """A postgresql:// URL for `role` on `database`, over TCP to 127.0.0.1."""
        password = quote(self.passwords[role], safe="")
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres", role: str = SUPERUSER) -> psycopg.Connection[tuple[object, ...]]:
        """A superuser (by default) autocommit connection, for fixtures and snapshots."""
        return psycopg.connect(self.url(role, database), autocommit=True, connect_timeout=10)

    def create_database(self, name: str, setup: Sequence[str] = ()) -> None:
        """A new database owned by the writer, with `setup` statements run as the writer, readable by the reader."""
        with self.connect() as admin:
            admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(WRITER)))
        with self.connect(name) as admin:
            admin.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(name), sql.Identifier(READER))
            )
        with self.connect(name, WRITER) as writer:
            writer.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(READER)))
            writer.execute(
                sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(
                    sql.Identifier(READER)
                )
            )
            writer.execute(
                sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON SEQUENCES TO {}").format(
                    sql.Identifier(READER)
                )
            )
            for statement in setup:
                writer.execute(statement.encode())

    def drop_database(self, name: str) -> None:
        with self.connect() as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def stop(self) -> None:
        _run(self.bin_dir, ["pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30"], check=False)

    def restart(self) -> None:
        """Stop the server (ending every session) and start it again on the same port."""
        self.stop()
        _start(self.bin_dir, self.directory, self.port)


def _as_postgres_user() -> bool:
    return os.geteuid() == 0


def _run(bin_dir: Path, command: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(bin_dir / command[0]), *command[1:]]
    if _as_postgres_user():
        argv = ["runuser", "-u", _RUN_AS_OS_USER, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=_START_SECONDS, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:2])} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def _initdb(bin_dir: Path, directory: Path, superuser_password: str) -> None:
    password_file = directory / "pwfile"
    password_file.write_text(superuser_password + "\n", encoding="utf-8")
    if _as_postgres_user():
        shutil.chown(password_file, _RUN_AS_OS_USER)
    _run(
        bin_dir,
        [
            "initdb", "-D", str(directory / "data"), "-U", SUPERUSER, f"--pwfile={password_file}",
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
        ],
    )  # fmt: skip
    password_file.unlink()


def _start(bin_dir: Path, directory: Path, port: int) -> None:
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={directory} -c fsync=off"
    _run(
        bin_dir,
        ["pg_ctl", "start", "-D", str(directory / "data"), "-l", str(directory / "server.log"), "-o", options,
         "-w", "-t", str(_START_SECONDS)],
    )  # fmt: skip


def _create_roles(server: PostgresServer) -> None:
    with server.connect() as admin:
        for role in (READER, WRITER):
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(server.passwords[role])
                )
            )
        admin.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(sql.Identifier(READER)))


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """Start a server in a new temporary directory; stop it and delete the directory afterwards.

    Raises PostgresUnavailable when the binaries are not installed, RuntimeError when the server will not start.
    """
    bin_dir = find_binaries()
    if bin_dir is None:
        raise PostgresUnavailable("initdb and pg_ctl were not found on PATH or in /usr/lib/postgresql/*/bin")
    # Directly under the system temp dir: pytest's own temp dirs are private to this user.
    directory = Path(tempfile.mkdtemp(prefix="safedb-pg-"))
    if _as_postgres_user():
        shutil.chown(directory, _RUN_AS_OS_USER, _RUN_AS_OS_USER)
    passwords = {role: secrets.token_urlsafe(16) for role in (SUPERUSER, READER, WRITER)}
    server: PostgresServer | None = None
    try:
        _initdb(bin_dir, directory, passwords[SUPERUSER])
        for attempt in range(3):
            port = free_port()
            try:
                _start(bin_dir, directory, port)
            except RuntimeError:
                if attempt == 2:
                    raise
                logger.warning("PostgreSQL did not start on port %d; trying another", port)
                continue
            server = PostgresServer(bin_dir, directory, port, passwords)
            break
        assert server is not None
        _create_roles(server)
        yield server
    except RuntimeError as exc:
        log = directory / "server.log"
        detail = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log.exists() else ""
        raise RuntimeError(f"{exc}\n--- server log ---\n{detail}") from exc
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)
