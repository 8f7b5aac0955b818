"""The embedded default's generated secrets: once, under the data dir, 0600; never in production."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from workers.cli import main
from workers.embedded_defaults import GENERATED_SECRETS, kept_secret, with_embedded_defaults
from workers.settings import Settings


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_secret_is_generated_once_and_kept_0600_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "data"))
    first = with_embedded_defaults(settings)
    for name in GENERATED_SECRETS:
        kept = tmp_path / "data" / "secrets" / name
        assert mode(kept) == 0o600
        assert getattr(first, name) == kept.read_text().strip() and len(getattr(first, name)) == 64
    assert mode(tmp_path / "data" / "secrets") == 0o700
    assert first.model_proxy_client_key != first.mcp_token_key
    # The next start (or another process sharing the data dir) reads the same values.
    again = with_embedded_defaults(settings)
    assert (again.model_proxy_client_key, again.mcp_token_key) == (first.model_proxy_client_key, first.mcp_token_key)
    assert sorted(p.name for p in (tmp_path / "data" / "secrets").iterdir()) == sorted(GENERATED_SECRETS)


def test_an_explicit_setting_wins_and_is_not_written(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), model_proxy_client_key="set-by-hand")
    filled = with_embedded_defaults(settings)
    assert filled.model_proxy_client_key == "set-by-hand"
    assert not (tmp_path / "secrets" / "model_proxy_client_key").exists()
    assert (tmp_path / "secrets" / "mcp_token_key").exists()  # the one not set is generated


def test_production_generates_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path), env="production")
    assert with_embedded_defaults(settings) == settings
    assert not (tmp_path / "secrets").exists()


def test_a_secret_readable_by_others_is_tightened_and_an_empty_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "model_proxy_client_key"
    path.parent.mkdir()
    path.write_text("abc\n")
    path.chmod(0o644)
    assert kept_secret(path) == "abc" and mode(path) == 0o600
    path.write_text("")
    with pytest.raises(OSError, match="is empty"):
        kept_secret(path)


def test_processes_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "key"
    start = threading.Barrier(8)
    found: list[str] = []

    def ask() -> None:
        start.wait()
        found.append(kept_secret(path))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(found) == 8 and len(set(found)) == 1 and found[0] == path.read_text().strip()
    assert [p.name for p in path.parent.iterdir()] == ["key"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("environ", "args", "said"),
    [
        ({"SQUADOPS_ENV": "production"}, ["--open"], "never runs with SQUADOPS_ENV=production"),
        ({}, ["--host", "0.0.0.0", "--open"], "only on a loopback address"),
    ],
)
def test_serve_refuses_the_dev_identity_in_production_and_off_loopback(
    environ: dict[str, str], args: list[str], said: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    monkeypatch.setenv("SQUADOPS_DATA_DIR", str(tmp_path))
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", *args]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "secrets").exists()  # refused before anything was built or kept
