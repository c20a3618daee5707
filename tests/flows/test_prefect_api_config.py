"""Which Prefect API a build would use, read without importing Prefect, and the API watch."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from numerical3d.prefect_engine import ApiWatch, configured_api_url, health


@pytest.fixture
def no_prefect_env(monkeypatch, tmp_path) -> Path:
    for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    return tmp_path


def test_the_environment_then_the_active_profile_then_prefect_toml(no_prefect_env, monkeypatch):
    cwd = no_prefect_env
    assert configured_api_url(cwd) is None  # Prefect's bundled default profile has no URL
    monkeypatch.setenv("PREFECT_PROFILE", "local")  # a bundled profile that names one
    assert configured_api_url(cwd) == "http://127.0.0.1:4200/api"
    monkeypatch.delenv("PREFECT_PROFILE")
    home = cwd / "home"
    home.mkdir()
    (home / "profiles.toml").write_text('active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://a:1/api"\n')
    assert configured_api_url(cwd) == "http://a:1/api"
    (home / "profiles.toml").write_text('active = "mine"\n[profiles.mine]\n')
    (cwd / "prefect.toml").write_text('[api]\nurl = "http://b:2/api"\n')
    assert configured_api_url(cwd) == "http://b:2/api"
    monkeypatch.setenv("PREFECT_API_URL", "http://c:3/api")
    assert configured_api_url(cwd) == "http://c:3/api"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_watch_gives_up_on_refused_connections_and_not_after_the_build():
    url = f"http://127.0.0.1:{closed_port()}/api"
    assert health(url, 1.0) == "connection refused"
    reasons: list[str] = []
    called = threading.Event()
    t = time.monotonic()
    with ApiWatch(url, lambda why: (reasons.append(why), called.set()), every_s=0.2, refused_s=1.0):
        assert called.wait(10)
    assert time.monotonic() - t < 15 and reasons[0].startswith("connection refused for ")
    late: list[str] = []
    with ApiWatch(url, late.append, every_s=0.2, refused_s=1.0):
        pass  # over before it could give up
    time.sleep(1.5)
    assert late == []
