"""The configuration file: strict parsing with precise messages, and every setting documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from safedb.config_file import ConfigFile, load_settings
from safedb.errors import ConfigurationError
from safedb.settings import Environment, Transport
from safedb.sql.classification import ChangeCategory

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
        ("[server]\n", "targets: Field required"),
        ("[targets]\n", "targets: Dictionary should have at least 1 item"),
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
