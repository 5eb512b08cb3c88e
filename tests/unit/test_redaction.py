"""Credentials never reach a log line, an event or an alert: the redaction of URLs, form bodies,
JSON and headers by parameter name and of known secrets by value, and the HTTP client loggers
kept quiet in every process."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from urllib.parse import quote

import pytest

from mdame_core.logs import HTTP_CLIENT_LOGGERS, log_event
from mdame_core.settings import REPO_ROOT
from mdame_domain.alerts import alert_text
from mdame_domain.redaction import REDACTED, Redactor, display_url, redact, secret_param

SECRET = "s3cr3t-VALUE-42"


@pytest.mark.parametrize(
    "name",
    [
        "access_token",
        "upload_token",
        "key",
        "token",
        "client_secret",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
        "code",
        "code_verifier",
        "upload_id",
        "password",
        "signature",
        "x-goog-api-key",
        "X-Amz-Signature",
        "X-Amz-Security-Token",
        "session_token",
        "app_secret",
    ],
)
@pytest.mark.parametrize("spelled", [str.lower, str.upper, str.title])
def test_each_secret_parameter_is_masked_in_a_query_whatever_its_case(name, spelled) -> None:
    name = spelled(name)
    url = f"https://api.example/v1/x?part=snippet&{name}={SECRET}&limit=3#top"
    cleaned = redact(f"GET {url} failed")
    assert SECRET not in cleaned
    assert f"?part=snippet&{name}={REDACTED}&limit=3#top failed" in cleaned
    # Alone in a query, and first in a form body.
    assert redact(f"https://h/p?{name}={SECRET}") == f"https://h/p?{name}={REDACTED}"
    assert redact(f"{name}={SECRET}&grant_type=x").startswith(f"{name}={REDACTED}&")


def test_the_platforms_urls_as_httpx_logs_them() -> None:
    lines = {
        # TikTok's upload_url: the upload token is the credential.
        "HTTP Request: PUT http://127.0.0.1:1/upload/?upload_id=81b1c9&upload_token=Ab-C_d1"
        ' "HTTP/1.1 201 Created"': ("81b1c9", "Ab-C_d1"),
        # Instagram's long-lived token refresh.
        "HTTP Request: GET https://graph.instagram.com/refresh_access_token?grant_type="
        'ig_refresh_token&access_token=IGAAxyz123 "HTTP/1.1 200 OK"': ("IGAAxyz123",),
        # A Google API key, URL-encoded.
        "GET https://h/v?part=x&key=AIza-SECRET%2F1&y=1": ("AIza-SECRET%2F1",),
        # A token endpoint's form, as an error might quote it.
        "grant_type=refresh_token&refresh_token=1//0gAbc&client_id=cid&client_secret=cs-9": (
            "1//0gAbc",
            "cs-9",
        ),
    }
    for line, secrets in lines.items():
        cleaned = redact(line)
        assert not [s for s in secrets if s in cleaned], cleaned
    assert "grant_type=refresh_token&" in redact("grant_type=refresh_token&refresh_token=x")
    assert "client_id=cid" in redact("client_id=cid&client_secret=cs-9")


def test_json_fields_headers_bot_paths_and_url_passwords() -> None:
    body = json.dumps({"access_token": SECRET, "refresh_token": SECRET, "expires_in": 3600})
    assert SECRET not in redact(f"answer: {body}") and '"expires_in": 3600' in redact(body)
    assert (
        redact("Authorization: Bearer ya29.a0AfH6SMBx1234") == f"Authorization: Bearer {REDACTED}"
    )
    assert redact("Authorization: OAuth IGAA1234567890abcdef") == f"Authorization: OAuth {REDACTED}"
    assert redact("https://api.telegram.org/bot123:AA-bb/getMe") == (
        f"https://api.telegram.org/bot{REDACTED}/getMe"
    )
    assert redact("postgresql://app:hunter22@db/x") == f"postgresql://app:{REDACTED}@db/x"


def test_what_is_not_a_credential_stays() -> None:
    """Error codes, idempotency keys, page parameters and prose are kept: only a parameter of a
    query or a form is a credential by the names "code", "key" and "sig"."""
    for text in (
        'TikTok video/init: HTTP 401 code=access_token_invalid {"code": "access_token_invalid"}',
        '{"idempotency_key": "pub:1:2", "work_key": "w", "regionCode": "US"}',
        "https://h/youtube/v3/videos?chart=mostPopular&regionCode=US&maxResults=3",
        "OAuth credentials were refused; the key is missing; e.g. Node.js 3.5",
    ):
        assert redact(text) == text
    assert secret_param("ACCESS_TOKEN") and secret_param("code")
    assert not secret_param("code", in_query=False) and not secret_param("idempotency_key")


def test_known_values_are_masked_as_written_and_url_encoded() -> None:
    secret = "sk/live+42=="
    text = f"header {secret}, query ?q={quote(secret, safe='')}"
    assert redact(text, [secret]) == f"header {REDACTED}, query ?q={REDACTED}"
    report = Redactor(["sk-test-not-secret-123", "", "1"])  # too short to mask by value
    assert report("key sk-test-not-secret-123 1") == "key *** 1"
    assert display_url("https://u:pw@h:8/p?access_token=t#f") == "https://u@h:8/p"


def test_alert_reasons_and_json_log_lines_are_redacted(tmp_path, monkeypatch) -> None:
    reason = f"upload failed at http://127.0.0.1:9/upload/?upload_id=1&upload_token={SECRET}"
    assert SECRET not in alert_text("tech", "provider_refused", reason)
    monkeypatch.setenv("MDAME_LOG_FILE", str(tmp_path / "pipeline.jsonl"))
    line = log_event("run-1", "tech", "publications", "failed", error=reason, lock_token=SECRET)
    assert SECRET not in line and json.loads(line)["error"].endswith(f"upload_token={REDACTED}")


def test_http_client_loggers_are_quiet_and_redacted_in_this_process(caplog) -> None:
    # Imported above, mdame_core quieted them: the root at DEBUG lets no request URL through.
    caplog.set_level(logging.DEBUG)
    for name in HTTP_CLIENT_LOGGERS:
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    logging.getLogger("httpx").info("HTTP Request: GET http://h/?access_token=%s", SECRET)
    assert SECRET not in caplog.text and "HTTP Request" not in caplog.text
    # Turned back on (an operator debugging), its lines are still redacted.
    caplog.set_level(logging.INFO, logger="httpx")
    logging.getLogger("httpx").info("HTTP Request: GET http://h/?access_token=%s", SECRET)
    assert "HTTP Request" in caplog.text and SECRET not in caplog.text


def test_a_run_servers_log_at_info_holds_no_request_url() -> None:
    """`mdame run-server`'s logging (inherited by the run workers it forks): the root at INFO,
    httpx quiet, and any other logger's line redacted by the root handler."""
    script = (
        "import logging\n"
        "from mdame_core.logs import configure_process_logging\n"
        "configure_process_logging()\n"
        f"logging.getLogger('httpx').info('HTTP Request: PUT http://h/u?upload_token={SECRET}')\n"
        f"logging.getLogger('mdame_x').warning('failed: http://h/r?access_token={SECRET}')\n"
        "logging.getLogger('mdame_x').info('a plain line')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert SECRET not in done.stderr and "HTTP Request" not in done.stderr
    assert f"access_token={REDACTED}" in done.stderr and "a plain line" in done.stderr
