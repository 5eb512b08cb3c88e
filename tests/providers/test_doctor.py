"""`mdame doctor` against the local protocol servers (fakes/), a real Redis, moto's S3 and real
PostgreSQL databases: a healthy deployment passes, and each fault of each server is reported
by name, in a FAIL row whose detail says what is wrong, without printing a secret.

The real client libraries do the talking (google-genai, edge-tts, google-api-python-client with
google-auth, httpx, redis-py, boto3, psycopg); nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fakes import gemini as fake_gemini
from fakes import youtube as fake_youtube
from fakes.edge_tts import EdgeTtsServer
from fakes.edge_tts import running as edge_running
from fakes.telegram import TelegramServer
from mdame_cli.doctor import Options, run_doctor
from mdame_cli.main import main as mdame_main
from mdame_cli.ui import free_port
from mdame_core.migrate import FUNCTIONS_DIR, MIGRATIONS_DIR, migrate
from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_domain.doctor import Check, Status, render_table
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from tests.adminkit import as_admin
from tests.scratch_db import DbUrls
from tests.telegramkit import TOKEN as BOT_TOKEN
from tests.telegramkit import telegram_server  # noqa: F401 - a fixture

GEMINI_KEY = "test-key-not-secret-gemini-0123456789"
REFRESH_TOKEN = "1//rt-doctor-not-secret-" + "d" * 20
CLIENT_SECRET = "cs-doctor-not-secret-0123"
REDIS_PASSWORD = "redis-pw-not-secret-42"
HANDLE = "@tech"
SECRETS = (GEMINI_KEY, BOT_TOKEN, REFRESH_TOKEN, CLIENT_SECRET, REDIS_PASSWORD, "not-secret")
# (test-key-not-secret etc.: every secret-like value in these tests says "not-secret", and no
# output may contain that word, so a leak of any of them fails the test.)


# -- the servers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server with a password, on a free port, for this module."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (scripts/install.sh installs it)")
    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(folder), "--requirepass", REDIS_PASSWORD],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("redis-server did not start")
            time.sleep(0.05)
        yield f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def gemini() -> Iterator[fake_gemini.FakeGemini]:
    with fake_gemini.running() as server:
        yield server


@pytest.fixture(scope="module")
def edge() -> Iterator[EdgeTtsServer]:
    with edge_running() as server:
        yield server


@dataclass
class Deployment:
    db: DbUrls
    state: StateStore
    youtube: fake_youtube.FakeYouTube
    gemini: fake_gemini.FakeGemini
    edge: EdgeTtsServer
    telegram: TelegramServer
    env: dict[str, str]
    media_url: str
    monkeypatch: pytest.MonkeyPatch
    dimensions: Path  # the registry folder synced into the database

    def setenv(self, **values: str) -> None:
        for name, value in values.items():
            self.monkeypatch.setenv(name, value)

    def run(self, **options: Any) -> dict[str, Check]:
        checks = run_doctor(Options(**{"timeout_s": 5.0, **options}))
        table = render_table(checks)
        for secret in SECRETS:
            assert secret not in table, f"a secret was printed:\n{table}"
        return {c.name: c for c in checks}


@pytest.fixture
def deployment(
    fresh_db: DbUrls,
    state: StateStore,
    gemini: fake_gemini.FakeGemini,
    edge: EdgeTtsServer,
    telegram_server: TelegramServer,  # noqa: F811 - the fixture
    redis_url: str,
    s3_bucket: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Deployment]:
    """A healthy deployment of one dimension (tech, published to a YouTube channel) with the
    production providers pointed at the local servers (MDAME_PROVIDERS=fakes)."""
    gemini.reset()
    edge.faults.clear()
    folder = tmp_path / "dimensions"
    folder.mkdir()
    text = (DIMENSIONS_DIR / "tech.yaml").read_text()
    lines = [
        f"  - {{platform: youtube, handle: '{HANDLE}', daily_quota_units: 10000}}"
        if line.strip().startswith("- {platform:")
        else line
        for line in text.splitlines()
    ]
    (folder / "tech.yaml").write_text("\n".join(lines) + "\n")
    sync_registry(as_admin(state), folder)
    master = MasterKey.generate()
    (account,) = state.list_accounts("tech")
    envelope = seal_grant(
        master, associated_data("dev", "youtube", HANDLE), {"refresh_token": REFRESH_TOKEN}
    )
    as_admin(state).store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )
    with fake_youtube.running(tmp_path / "youtube") as yt:
        yt.add_channel(HANDLE, REFRESH_TOKEN)
        client = tmp_path / "client.json"
        client.write_text(
            json.dumps(
                {
                    "installed": {
                        "client_id": "cid.doctor",
                        "client_secret": CLIENT_SECRET,
                        "token_uri": yt.token_uri,
                    }
                }  # fmt: skip
            )
        )
        env = {
            "ENV": "dev",
            "MDAME_PROVIDERS": "fakes",
            "MDAME_HOME": str(tmp_path / "home"),
            "MDAME_DATABASE_URL": fresh_db.owner,
            "MDAME_APP_DATABASE_URL": fresh_db.app,
            "GEMINI_API_KEY": GEMINI_KEY,
            "MDAME_GEMINI_BASE_URL": gemini.base_url,
            "MDAME_EDGE_TTS_URL": edge.wss_url,
            "MDAME_YOUTUBE_ROOT_URL": yt.base_url,
            "MDAME_GOOGLE_TOKEN_URI": yt.token_uri,
            "MDAME_YOUTUBE_CLIENT_SECRETS": str(client),
            "MDAME_MASTER_KEY": master.encoded(),
            "MDAME_TELEGRAM_API_URL": telegram_server.base_url,
            "MDAME_TELEGRAM_BOT_TOKEN": BOT_TOKEN,
            "MDAME_TELEGRAM_CHAT_ID": "-100123",
            "MDAME_GPU_EXECUTOR": "celery",
            "MDAME_CELERY_BROKER_URL": redis_url,
            "MDAME_VIDEO_ENCODER": "auto",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        s3_bucket.apply(monkeypatch)
        yield Deployment(
            fresh_db,
            state,
            yt,
            gemini,
            edge,
            telegram_server,
            env,
            s3_bucket.url,
            monkeypatch,
            folder,
        )


def failed(checks: dict[str, Check]) -> dict[str, str]:
    return {name: c.detail for name, c in checks.items() if c.status is Status.FAIL}


# -- the tests ---------------------------------------------------------------------------------


def test_healthy_deployment_passes_every_check(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    code = mdame_main(["doctor", "--timeout", "5", "--min-free-gb", "0.001"])
    out = capsys.readouterr().out
    assert code == 0, out
    for secret in SECRETS:
        assert secret not in out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:-2] if line[:1] != " "}
    expected_ok = ["env", "database", "migrations", "roles", "trends:feeds/tech.xml",
                   "gemini:gemini-3.8-flash", "gemini:gemini-3.8-flash-tts",
                   "safety:gemini-3.8-flash", "edge_tts",
                   f"youtube:tech/{HANDLE}", "telegram", "redis", "object_store",
                   "ffmpeg:libx264", "disk:home"]  # fmt: skip
    assert {name: rows.get(name) for name in expected_ok} == dict.fromkeys(expected_ok, "OK"), out
    assert rows["gpu"] == "SKIP"  # fakes: procedural clips, and no NVIDIA device here
    assert rows["diffusers"] == "SKIP"  # the fakes bind procedural clips: no model folder
    assert "channels.list answers" in out and "bot @mdame_local_bot" in out
    # Cheap calls: models.get per model (no generateContent), a token refresh + channels.list.
    assert deployment.gemini.request_count == 0
    assert any("channels" in r for r in deployment.youtube.requests())


def test_each_fault_of_the_servers_is_reported_by_name(deployment: Deployment) -> None:
    deployment.gemini.auth_error = 401
    deployment.edge.set_fault("403")
    deployment.youtube.faults.push("invalid_grant")
    deployment.setenv(
        MDAME_TELEGRAM_BOT_TOKEN="654321:wrong-token-not-secret",
        MDAME_CELERY_BROKER_URL=f"redis://:{REDIS_PASSWORD}@127.0.0.1:{free_port()}/0",
        MDAME_MEDIA_URL=deployment.media_url.replace("s3://mdame-test-", "s3://missing-"),
        MDAME_VIDEO_ENCODER="h264_nvenc",
    )
    checks = deployment.run(min_free_bytes=1 << 60)
    fails = failed(checks)
    assert "refused GEMINI_API_KEY (HTTP 401 UNAUTHENTICATED" in fails["gemini"]
    assert "answered HTTP 403" in fails["edge_tts"]
    assert "token refresh refused (invalid_grant)" in fails[f"youtube:tech/{HANDLE}"]
    assert "mdame accounts connect tech --account @tech" in fails[f"youtube:tech/{HANDLE}"]
    assert "getMe" in fails["telegram"] and "401 Unauthorized" in fails["telegram"]
    assert "not reachable" in fails["redis"] and "broker" in fails["redis"]
    assert "bucket missing-" in fails["object_store"] and "does not exist" in fails["object_store"]
    assert "MDAME_VIDEO_ENCODER=h264_nvenc" in fails["ffmpeg:h264_nvenc"]
    assert "free under" in fails["disk:home"]
    assert checks["database"].status is Status.OK and checks["roles"].status is Status.OK


def test_servers_down_wrong_password_and_missing_model(deployment: Deployment) -> None:
    closed = free_port()
    deployment.gemini.models = ["gemini-2.5-flash"]
    deployment.youtube.stop()
    redis = deployment.env["MDAME_CELERY_BROKER_URL"].replace(REDIS_PASSWORD, "wrong-not-secret")
    deployment.setenv(
        MDAME_EDGE_TTS_URL=f"ws://127.0.0.1:{closed}/consumer/speech/synthesize/readaloud/edge/v1"
        "?TrustedClientToken=x",
        MDAME_TELEGRAM_API_URL=f"http://127.0.0.1:{closed}",
        MDAME_CELERY_BROKER_URL=redis,
    )
    fails = failed(deployment.run())
    assert "HTTP 404 NOT_FOUND" in fails["gemini:gemini-3.8-flash"]
    assert "gemini_tts_model in dimensions/tech.yaml" in fails["gemini:gemini-3.8-flash-tts"]
    assert "not reachable" in fails["edge_tts"]
    assert "not reachable" in fails[f"youtube:tech/{HANDLE}"]
    assert "token endpoint" in fails[f"youtube:tech/{HANDLE}"]
    assert "not reachable" in fails["telegram"]
    assert "refused the password" in fails["redis"]
    deployment.setenv(MDAME_GEMINI_BASE_URL=f"http://127.0.0.1:{closed}")
    fails = failed(deployment.run(only=frozenset({"gemini"})))
    assert "not reachable" in fails["gemini"]


def _set_models(deployment: Deployment, **fields: str) -> None:
    """tech's YAML with these model fields, synced as the registry sensor would."""
    folder = deployment.dimensions
    text = (folder / "tech.yaml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith(tuple(fields))]
    lines += [f"{name}: {value}" for name, value in fields.items()]
    (folder / "tech.yaml").write_text("\n".join(lines) + "\n")
    sync_registry(as_admin(deployment.state), folder)


def test_each_configured_model_is_checked_with_models_get(deployment: Deployment) -> None:
    only = frozenset({"gemini"})
    _set_models(deployment, gemini_text_model="gemini-9.9-imaginary")
    checks = deployment.run(only=only)
    # The known TTS model passes; the unknown text model fails naming itself and its field.
    assert checks["gemini:gemini-3.8-flash-tts"].status is Status.OK
    assert "used by tech (gemini_tts_model)" in checks["gemini:gemini-3.8-flash-tts"].detail
    missing = checks["gemini:gemini-9.9-imaginary"]
    assert missing.status is Status.FAIL
    assert "HTTP 404 NOT_FOUND: models/gemini-9.9-imaginary is not found" in missing.detail
    assert "set gemini_text_model in dimensions/tech.yaml" in missing.detail
    assert "gemini:gemini-3.8-flash" not in checks  # the default is not what tech uses now

    # Transient answers are warnings naming the cause; the next model is still checked.
    _set_models(deployment, gemini_text_model="gemini-3.8-flash")
    deployment.gemini.faults.push("503")
    checks = deployment.run(only=only)
    flaky = checks["gemini:gemini-3.8-flash"]
    assert flaky.status is Status.WARN and "HTTP 503 UNAVAILABLE" in flaky.detail
    assert checks["gemini:gemini-3.8-flash-tts"].status is Status.OK
    deployment.gemini.faults.push("hang", hang_s=1.0)
    checks = deployment.run(only=only, timeout_s=0.3)
    slow = checks["gemini:gemini-3.8-flash"]
    assert slow.status is Status.WARN and "no answer within 0.3s (ReadTimeout" in slow.detail
    assert checks["gemini:gemini-3.8-flash-tts"].status is Status.OK

    # A refused key is one FAIL naming the variable, never its value (run() checks that).
    deployment.gemini.auth_error = 403
    checks = deployment.run(only=only)
    assert [c.name for c in checks.values()] == ["gemini"]
    assert checks["gemini"].status is Status.FAIL
    assert "refused GEMINI_API_KEY (HTTP 403 PERMISSION_DENIED" in checks["gemini"].detail


def test_missing_grant_and_settings(deployment: Deployment) -> None:
    deployment.monkeypatch.delenv("GEMINI_API_KEY")
    deployment.monkeypatch.delenv("MDAME_TELEGRAM_BOT_TOKEN")
    deployment.monkeypatch.delenv("MDAME_CELERY_BROKER_URL")
    with psycopg.connect(deployment.db.owner, autocommit=True) as conn:
        conn.execute("DELETE FROM mdame.account_credentials")
    fails = failed(deployment.run(only=frozenset({"gemini", "youtube", "telegram", "redis"})))
    assert fails == {
        "gemini": "GEMINI_API_KEY is not set",
        f"youtube:tech/{HANDLE}": "no stored grant: run `mdame accounts connect tech "
        "--account @tech`",
        "telegram": "MDAME_TELEGRAM_BOT_TOKEN is not set: alerts and reports cannot reach Telegram",
        "redis": "MDAME_GPU_EXECUTOR=celery, but MDAME_CELERY_BROKER_URL is unset",
    }
    # Telegram: no chat for the dimension; then the Bot API in an outage.
    deployment.setenv(MDAME_TELEGRAM_BOT_TOKEN=BOT_TOKEN)
    deployment.monkeypatch.delenv("MDAME_TELEGRAM_CHAT_ID")
    fails = failed(deployment.run(only=frozenset({"telegram"})))
    assert "no chat for tech: set MDAME_TELEGRAM_CHAT_ID" in fails["telegram"]
    deployment.setenv(MDAME_TELEGRAM_CHAT_ID="-100123")
    deployment.telegram.set_down(503)
    fails = failed(deployment.run(only=frozenset({"telegram"})))
    assert "getMe at http://127.0.0.1" in fails["telegram"] and "HTTP 503" in fails["telegram"]


def test_database_not_migrated_and_roles_wrong(
    empty_db: DbUrls, deployment: Deployment, tmp_path: Path
) -> None:
    only = frozenset({"database", "migrations", "roles"})
    # Roles: a direct write grant and a table without row-level security.
    with psycopg.connect(deployment.db.owner, autocommit=True) as conn:
        conn.execute("GRANT INSERT ON mdame.trends TO mdame_app")
        conn.execute("ALTER TABLE mdame.topics DISABLE ROW LEVEL SECURITY")
    fails = failed(deployment.run(only=only))
    assert "mdame_app may write tables directly: trends (INSERT)" in fails["roles"]
    assert "row-level security off or no mdame_app policy: topics" in fails["roles"]
    # Not migrated at all.
    deployment.setenv(MDAME_DATABASE_URL=empty_db.owner, MDAME_APP_DATABASE_URL=empty_db.app)
    checks = deployment.run(only=only)
    assert checks["migrations"].status is Status.FAIL
    assert "not migrated" in checks["migrations"].detail
    # Part-migrated: the schema, and the first three function files only.
    partial = tmp_path / "functions"
    partial.mkdir()
    files = sorted(MIGRATIONS_DIR.glob("*.sql"))
    functions = sorted(FUNCTIONS_DIR.glob("*.sql"))
    for f in functions[:3]:
        shutil.copy(f, partial / f.name)
    migrate(empty_db.owner, "dev", functions_dir=partial)
    fails = failed(deployment.run(only=only))
    assert f"{len(functions) - 3} pending: functions/{functions[3].name}" in fails["migrations"]
    assert "run `mdame db migrate`" in fails["migrations"]
    # An applied file edited afterwards (its recorded checksum no longer matches).
    with psycopg.connect(empty_db.owner, autocommit=True) as conn:
        conn.execute(
            "UPDATE mdame.schema_migrations SET sha256 = repeat('0', 64) WHERE filename = %s",
            (files[0].name,),
        )
    fails = failed(deployment.run(only=only))
    assert f"edited after it was applied: {files[0].name}" in fails["migrations"]


def test_env_and_offline_providers(deployment: Deployment) -> None:
    deployment.monkeypatch.delenv("ENV")
    checks = deployment.run(only=frozenset({"env", "gemini"}))
    assert checks["env"].status is Status.FAIL and "ENV must be set" in checks["env"].detail
    assert checks["gemini"].status is Status.SKIP
    deployment.setenv(ENV="dev", MDAME_PROVIDERS="offline", MDAME_GPU_EXECUTOR="in_process")
    checks = deployment.run()
    for name in ("gemini", "edge_tts", "youtube", "telegram"):
        assert checks[name].status is Status.SKIP
        assert "offline providers" in checks[name].detail
    assert checks["redis"].status is Status.SKIP
    assert checks["gpu"].status is Status.SKIP
    assert checks["database"].status is Status.OK and checks["object_store"].status is Status.OK
    # A GPU worker host without a GPU (this CPU host, told one is required); and production
    # visuals generating in process need one too.
    checks = deployment.run(only=frozenset({"gpu"}), gpu="required")
    assert checks["gpu"].status is Status.FAIL
    assert "no NVIDIA device on this host; needed: --gpu required" in checks["gpu"].detail
    deployment.setenv(MDAME_PROVIDERS="production")
    checks = deployment.run(only=frozenset({"gpu"}))
    assert "needed: diffusers (animatediff) generates on this host" in checks["gpu"].detail
    deployment.setenv(MDAME_PROVIDERS="offline")
    # A local media folder that cannot be written; a database that is not there.
    deployment.setenv(
        MDAME_MEDIA_URL="file:///proc/mdame-doctor-media",
        MDAME_APP_DATABASE_URL=f"postgresql://mdame_app@127.0.0.1:{free_port()}/mdame",
    )
    checks = deployment.run(only=frozenset({"object_store", "database", "youtube"}))
    assert checks["object_store"].status is Status.FAIL
    assert "/proc/mdame-doctor-media not writable" in checks["object_store"].detail
    assert checks["database"].status is Status.FAIL
    assert "cannot connect" in checks["database"].detail
    assert checks["youtube"].status is Status.SKIP  # offline providers
    deployment.setenv(ENV="prod")
    checks = deployment.run(only=frozenset({"env"}))
    assert checks["env"].status is Status.FAIL
    assert "ENV=prod accepts only the production providers" in checks["env"].detail


# -- make test-live ----------------------------------------------------------------------------


def test_live_smoke_skips_without_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.live import smoke

    for name in (*smoke.REQUIRED, "MDAME_MASTER_KEY", "MDAME_MASTER_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    assert smoke.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("make test-live: SKIPPED: set MDAME_YOUTUBE_CLIENT_SECRETS, ")
    assert "MDAME_TELEGRAM_BOT_TOKEN, MDAME_MASTER_KEY (or the key file" in out
    assert "GEMINI_API_KEY" not in out


def test_live_smoke_skips_without_a_grant_and_stops_on_a_doctor_fail(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.live import smoke

    assert smoke.main(["--dimension", "science"]) == 0
    assert "SKIPPED: no stored YouTube grant for dimension science" in capsys.readouterr().out
    # tech has a grant; the doctor then finds that this host cannot make the clips.
    deployment.setenv(MDAME_GPU_EXECUTOR="in_process")
    assert smoke.main([]) == 1
    out = capsys.readouterr().out
    assert "no NVIDIA device on this host" in out
    assert out.rstrip().endswith("FAILED: `mdame doctor` found problems; nothing was run")
