"""The configuration file: strict parsing with precise messages, and every setting documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from safedb.config_file import ConfigFile, load_settings
from safedb.errors import ConfigurationError
from safedb.settings import Environment, Transport
from safedb.sql.classification import ChangeCategory
from safedb.web.passwords import hash_password, verify_password

ROOT = Path(__file__).resolve().parents[2]

FULL = """
[server]
host = "127.0.0.1"
port = 8123
transport = "http"
audit_db = "logs/audit.db"
data_dir = "data"
request_state_keys = ["0123456789abcdef0123456789abcdef-key"]
text_rows = 20
readers = 2
progress_interval = 5.0

[limits]
max_rows = 100
max_result_bytes = 65536
statement_timeout = 12.5
preview_timeout = 2.0

[targets.app]
database = "app.db"
environment = "development"

[targets.prod]
database = "postgresql://reader@db.internal/app"
writer_database = "postgresql://writer@db.internal/app"
environment = "production"

[targets.prod.policy]
ask = ["data"]
refuse = ["schema", "database", "extension", "unknown"]
min_justification = 25
type_target_name = true
approval_timeout = 120.0
allowed_paths = ["backups"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "safedb.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_full_file(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL))
    assert settings.port == 8123
    assert settings.transport is Transport.HTTP
    assert settings.audit_location == (tmp_path / "logs" / "audit.db").resolve()
    assert settings.data_dir == (tmp_path / "data").resolve()
    assert settings.limits.max_rows == 100
    assert settings.limits.statement_timeout == 12.5
    app, prod = settings.targets
    assert (app.name, app.database, app.environment) == (
        "app",
        str((tmp_path / "app.db").resolve()),
        Environment.DEVELOPMENT,
    )
    assert prod.writer_database == "postgresql://writer@db.internal/app"
    assert prod.environment is Environment.PRODUCTION
    assert prod.policy.ask == {ChangeCategory.DATA}
    assert ChangeCategory.SCHEMA in prod.policy.refuse
    assert prod.policy.type_target_name is True
    assert prod.policy.allowed_paths == ((tmp_path / "backups").resolve(),)
    assert "refused: " in prod.safety_mode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[targets.a]\ndatabse = 'x.db'\n", "targets.a.databse: Extra inputs are not permitted"),
        ("[server]\nport = '8000'\n[targets.a]\n", "server.port: Input should be a valid integer"),
        ("[server]\nport = 70000\n[targets.a]\n", "server.port: Input should be less than or equal to 65535"),
        ("[targets.a.policy]\nask = ['data', 'everything']\n", "targets.a.policy.ask.1: Input should be"),
        ("[targets.a]\nenvironment = 'prod'\n", "targets.a.environment: Input should be"),
        (
            "[limits]\nstatement_timeout = 0.05\n[targets.a]\n",
            "limits.statement_timeout: Input should be greater than or equal to 0.1",
        ),
        (
            "[targets.a.policy]\napproval_timeout = 0.5\n",
            "targets.a.policy.approval_timeout: Input should be greater than or equal to 1",
        ),
        (
            "[limits]\nstatement_timeout = nan\n[targets.a]\n",
            "limits.statement_timeout: Input should be a finite number",
        ),
        ("[targets.a.policy]\napproval_timeout = inf\n", "targets.a.policy.approval_timeout: Input should be a finite"),
        (
            # An answer's justification holds at most 2,000 characters: no Production change could pass.
            "[targets.a.policy]\nmin_justification = 2001\n",
            "targets.a.policy.min_justification: Input should be less than or equal to 2000",
        ),
        ("[server]\n", "targets: the file names no target to serve; add one, such as [targets.main] with database"),
        ("[targets]\n", "targets: the file names no target to serve"),
        ("[serve]\n[targets.a]\n", "serve: Extra inputs are not permitted"),
        ("[targets.'a b']\n", "targets.a b: a target name uses only"),
        ("[server]\nrequest_state_keys = ['short']\n[targets.a]\n", "at least 32 bytes"),
        ("[targets.a\n", "is not valid TOML"),
    ],
)
def test_invalid_files_are_rejected_precisely(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_settings(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="Cannot read the configuration file"):
        load_settings(tmp_path / "nope.toml")


def test_a_file_that_is_not_utf8_is_one_clear_message(tmp_path: Path) -> None:
    # TOML is UTF-8; a file saved in another encoding (here Latin-1) is a mistake to name, not a traceback.
    path = tmp_path / "safedb.toml"
    path.write_bytes("[targets.caf\u00e9]\n".encode("latin-1"))
    with pytest.raises(ConfigurationError, match=r"safedb.toml is not UTF-8 text \(byte 0xe9 at position 12\)"):
        load_settings(path)


def _documented_keys() -> set[str]:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([A-Za-z_.]+)` \|", text, re.MULTILINE))


def _setting_keys() -> set[str]:
    keys = set()
    for section, model in (
        ("server", ConfigFile.model_fields["server"]),
        ("limits", ConfigFile.model_fields["limits"]),
    ):
        keys |= {f"{section}.{name}" for name in model.annotation.model_fields}  # type: ignore[union-attr]
    target = ConfigFile.model_fields["targets"].annotation.__args__[1]  # type: ignore[union-attr]
    keys |= {f"targets.NAME.{name}" for name in target.model_fields if name != "policy"}
    policy = target.model_fields["policy"].annotation
    keys |= {f"targets.NAME.policy.{name}" for name in policy.model_fields}
    return keys


def test_web_channel_needs_approvers(tmp_path: Path) -> None:
    text = "[targets.prod.policy]\nchannel = 'web'\n"
    with pytest.raises(ConfigurationError, match=re.escape("configure server.approvers")):
        load_settings(write(tmp_path, text))


def test_approver_password_must_be_a_hash(tmp_path: Path) -> None:
    text = "[server]\napprovers = [{ name = 'alice', password_hash = 'secret' }]\n[targets.a]\n"
    with pytest.raises(ConfigurationError, match=re.escape("not one `safedb approver-hash` made")):
        load_settings(write(tmp_path, text))


@pytest.mark.parametrize(
    "password_hash",
    [
        "pbkdf2_sha256$1$abcd$a",  # a digest of one character: no base64 text has that length
        "pbkdf2_sha256$1000$abcd$" + "!" * 43,
        "pbkdf2_sha256$1000$abcd$" + "A" * 22,  # a digest of 16 bytes: a SHA-256 one has 32
        "pbkdf2_sha256$1000$$" + "A" * 43,
        "pbkdf2_sha256$0$abcd$" + "A" * 43,
        "pbkdf2_sha256$10000001$abcd$" + "A" * 43,
        "pbkdf2_sha256$99999999999$abcd$" + "A" * 43,
        "pbkdf2_sha256$\u0661\u0662$abcd$" + "A" * 43,  # digits, but not ASCII ones
    ],
)
def test_a_malformed_password_hash_is_refused_and_never_breaks_a_sign_in(tmp_path: Path, password_hash: str) -> None:
    """Only the scheme and the digits of the count were checked: a malformed digest passed start-up, and every
    sign-in as that approver was a 500 (binascii.Error); a count of 99999999999 held a password-check slot for
    hours at each sign-in."""
    text = f"[server]\napprovers = [{{ name = 'bob', password_hash = '{password_hash}' }}]\n[targets.a]\n"
    message = "server.approvers: the password_hash of 'bob' is not one `safedb approver-hash` made"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_settings(write(tmp_path, text))
    assert verify_password(password_hash, "whatever") is False


def test_a_password_hash_of_up_to_ten_million_rounds_is_taken(tmp_path: Path) -> None:
    largest = hash_password("pw", iterations=1000).replace("$1000$", "$10000000$")
    text = f"[server]\napprovers = [{{ name = 'bob', password_hash = '{largest}' }}]\n[targets.a]\n"
    assert load_settings(write(tmp_path, text)).approvers[0].password_hash == largest


def test_a_kind_both_asked_and_refused_is_refused(tmp_path: Path) -> None:
    text = '[targets.a]\n[targets.a.policy]\nask = ["data", "schema"]\nrefuse = ["schema"]\n'
    message = "targets.a.policy: schema is listed in both ask and refuse"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_settings(write(tmp_path, text))


@pytest.mark.parametrize("name", ["\u043f\u0440\u043e\u0434", "\u3164", "a" * 65])
def test_a_target_name_is_short_and_ascii(tmp_path: Path, name: str) -> None:
    """Look-alike letters of another script, or one that draws blank, read as another name in a question."""
    with pytest.raises(ConfigurationError, match="a target name uses only ASCII letters"):
        load_settings(write(tmp_path, f'[targets."{name}"]\n'))


def test_an_approver_name_with_a_colon_is_refused(tmp_path: Path) -> None:
    """HTTP Basic sends `name:password` and is split at the first colon: `carol:x` could never sign in."""
    hashed = hash_password("pw", iterations=1000)
    text = f"[server]\napprovers = [{{ name = 'carol:x', password_hash = '{hashed}' }}]\n[targets.a]\n"
    message = "server.approvers: the name 'carol:x' contains ':', where a browser's sign-in ends the name"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_settings(write(tmp_path, text))


@pytest.mark.parametrize(
    ("public_url", "problem"),
    [
        ("http://[bad", "is not a valid URL: Invalid IPv6 URL"),
        ("http://h:99999", "is not a valid URL: Port out of range 0-65535"),
        ("ftp://x", "is not an http:// or https:// URL with a host"),
        ("not a url", "is not an http:// or https:// URL with a host"),
        ("javascript:alert(1)", "is not an http:// or https:// URL with a host"),
        ("https://", "is not an http:// or https:// URL with a host"),
        ("https://h/safe db", "contains spaces or control characters"),
        ("https://h/?next=1", "has a query or fragment"),
    ],
)
def test_public_url_must_be_a_web_address(tmp_path: Path, public_url: str, problem: str) -> None:
    """Approval links are `public_url` + `/approvals/...`: anything was taken (`not a url/approvals/ID?t=...`), and
    `http://[bad` stopped the start with a ValueError traceback."""
    text = f"[server]\npublic_url = '{public_url}'\n[targets.a]\n"
    with pytest.raises(ConfigurationError, match=re.escape(f"server.public_url: {public_url!r} {problem}")):
        load_settings(write(tmp_path, text))


@pytest.mark.parametrize("public_url", ["https://Approvals.example:443/safedb/", "http://[::1]:8443"])
def test_public_url_with_a_port_and_a_path(tmp_path: Path, public_url: str) -> None:
    assert load_settings(write(tmp_path, f"[server]\npublic_url = '{public_url}'\n[targets.a]\n")).public_url == (
        public_url
    )


def test_an_audit_url_python_cannot_split_is_still_a_url(tmp_path: Path) -> None:
    """`urlsplit` refuses a stray `[` (`Invalid IPv6 URL`, a traceback); libpq reports what is wrong when the log is
    opened, and takes a `[` in a password. It must not become a file path next to the configuration file."""
    url = "postgresql://auditor:pa[ss@db.internal/app"
    settings = load_settings(write(tmp_path, f"[server]\naudit_db = '{url}'\n[targets.a]\n"))
    assert settings.audit_location == url


def test_every_setting_is_documented() -> None:
    documented = _documented_keys()
    missing = _setting_keys() - documented
    assert missing == set(), f"settings missing from docs/configuration.md: {sorted(missing)}"
    stale = documented - _setting_keys()
    assert stale == set(), f"docs/configuration.md documents settings that do not exist: {sorted(stale)}"


@pytest.mark.parametrize("policy", ["refuse = []", "refuse = []\nask = ['data', 'extension']"])
def test_extension_loading_is_described_as_refused_whatever_the_policy_says(tmp_path: Path, policy: str) -> None:
    """The deny list refuses it in any case (docs/safety.md, section 3): the banner must not say it runs."""
    (target,) = load_settings(write(tmp_path, f"[targets.a.policy]\n{policy}\n")).targets
    mode = target.safety_mode()
    assert "refused: extension loading" in mode
    assert "extension" not in mode.partition("refused:")[0]
