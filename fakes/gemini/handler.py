"""The fake Gemini's request handler: the model list and one model, generateContent with
its faults and outages, and the /_fake/ controls."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from fakes.gemini.answer import answer
from fakes.gemini.judge import carries_images
from fakes.gemini.pictures import pictures_in
from fakes.gemini.protocol import BadRequest, field_of
from fakes.gemini.state import FakeGemini, Fault, SeenRequest

if TYPE_CHECKING:
    from fakes.gemini.server import Server

_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+):generateContent$")
_MODELS_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models$")
_MODEL_PATH = re.compile(r"^/(?P<version>v1beta|v1|v1alpha)/models/(?P<model>[^/:]+)$")
_AUTH_STATUS = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}


def _error_body(code: int, status: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    seen: SeenRequest | None = None  # the generateContent request being answered

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass  # quiet: tests read the requests list instead

    def _send(self, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        if self.seen is not None:
            self.seen.status = code
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw or b"{}")

    def do_GET(self) -> None:
        self.seen = None  # a kept-alive connection's previous request is answered
        state = self.server.fake
        if urlparse(self.path).path == "/_fake/requests":
            with state.lock:
                seen = [
                    {
                        "model": r.model,
                        "kind": r.kind,
                        "fault": r.fault,
                        "body": r.body,
                        "status": r.status,
                        "usage": r.usage,
                    }
                    for r in state.requests
                ]
            self._send(200, json.dumps(seen).encode())
            return
        if urlparse(self.path).path == "/_fake/counters":
            self._send(200, json.dumps(state.counters()).encode())
            return
        if _MODELS_PATH.match(urlparse(self.path).path):
            self._models(state)
            return
        if one := _MODEL_PATH.match(urlparse(self.path).path):
            self._model(state, one["version"], one["model"])
            return
        self._send(404, _error_body(404, "NOT_FOUND", "no such path"))

    def _refused(self, state: FakeGemini) -> bool:
        """Answers a missing key (403, as Google does) or the configured auth_error."""
        url = urlparse(self.path)
        key = self.headers.get("x-goog-api-key") or parse_qs(url.query).get("key", [""])[0]
        if not key:
            message = "Method doesn't allow unregistered callers. Please use an API key."
            self._send(403, _error_body(403, "PERMISSION_DENIED", message))
            return True
        if state.auth_error is not None:
            code = state.auth_error
            status = _AUTH_STATUS.get(code, "UNAUTHENTICATED")
            self._send(code, _error_body(code, status, "API key not valid."))
            return True
        return False

    def _models(self, state: FakeGemini) -> None:
        if self._refused(state):
            return
        query = parse_qs(urlparse(self.path).query)
        size = max(1, int(query.get("pageSize", ["50"])[0]))
        start = int(query.get("pageToken", ["0"])[0] or 0)
        names = state.models[start : start + size]
        body: dict[str, Any] = {
            "models": [
                {
                    "name": f"models/{name}",
                    "displayName": name,
                    "supportedGenerationMethods": ["generateContent"],
                }
                for name in names
            ]
        }
        if start + size < len(state.models):
            body["nextPageToken"] = str(start + size)
        self._send(200, json.dumps(body).encode())

    def _model(self, state: FakeGemini, version: str, model: str) -> None:
        """models.get: the Model resource as Google answers it, or its 404."""
        if self._refused(state):
            return
        fault = state.faults.pop()
        if fault is not None and fault.kind in ("429", "500", "503", "hang", "drop"):
            self._generate(state, {}, fault)
            return
        if model not in state.models:
            message = (
                f"models/{model} is not found for API version {version}, or is not supported "
                "for get. Call ListModels to see the list of available models and their "
                "supported methods."
            )
            self._send(404, _error_body(404, "NOT_FOUND", message))
            return
        tts = model.endswith("-tts")
        body = {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model,
            "description": f"{model} (a local fake)",
            "inputTokenLimit": 8192 if tts else 1048576,
            "outputTokenLimit": 16384 if tts else 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "maxTemperature": 2,
        }
        self._send(200, json.dumps(body).encode())

    def do_POST(self) -> None:
        self.seen = None
        url = urlparse(self.path)
        state = self.server.fake
        if url.path.startswith("/_fake/"):
            self._control(url.path, state)
            return
        match = _PATH.match(url.path)
        try:
            body = self._body()
        except json.JSONDecodeError:
            self._send(400, _error_body(400, "INVALID_ARGUMENT", "the body is not JSON"))
            return
        if match is None:
            self._send(404, _error_body(404, "NOT_FOUND", f"no such method {url.path}"))
            return
        if self._refused(state):
            return
        if match["model"] not in state.models:
            message = (
                f"models/{match['model']} is not found for API version {match['version']}, or "
                "is not supported for generateContent. Call ListModels to see the list of "
                "available models and their supported methods."
            )
            self._seen(state, SeenRequest(match["model"], "text", body, "404"))
            self._send(404, _error_body(404, "NOT_FOUND", message))
            return
        config = field_of(body, "generationConfig", "generation_config") or {}
        modalities = field_of(config, "responseModalities", "response_modalities") or []
        asked = [str(m).upper() for m in modalities]
        kind = "image" if "IMAGE" in asked else "audio" if "AUDIO" in asked else "text"
        judged = kind == "text" and carries_images(body.get("contents"))
        out = state.outage_on in (None, "judge" if judged else kind)
        if state.outage is not None and out:
            self._seen(state, SeenRequest(match["model"], kind, body, "outage"))
            code = state.outage
            status = "UNAVAILABLE" if code == 503 else "INTERNAL"
            self._send(code, _error_body(code, status, "The service is currently unavailable."))
            return
        fault = state.faults.pop("judge" if judged else kind)
        self._seen(state, SeenRequest(match["model"], kind, body, fault.kind if fault else None))
        if fault is not None and fault.kind == "hold":
            with state.lock:
                state.holding.append(fault)
            fault.released.wait(fault.hang_s)
            fault = None  # then answered as asked
        self._generate(state, body, fault)

    def _seen(self, state: FakeGemini, seen: SeenRequest) -> None:
        with state.lock:
            state.requests.append(seen)
        self.seen = seen

    def _generate(self, state: FakeGemini, body: Mapping[str, Any], fault: Fault | None) -> None:
        kind = fault.kind if fault else None
        if kind == "429":
            message = "Resource has been exhausted (e.g. check quota)."
            headers = {"Retry-After": str(fault.retry_after)} if fault else {}
            self._send(429, _error_body(429, "RESOURCE_EXHAUSTED", message), headers)
        elif kind == "500":
            self._send(500, _error_body(500, "INTERNAL", "An internal error has occurred."))
        elif kind == "503":
            self._send(503, _error_body(503, "UNAVAILABLE", "The model is overloaded."))
        elif kind == "400":
            message = 'Invalid JSON payload received. Unknown name "bogus": Cannot find field.'
            self._send(400, _error_body(400, "INVALID_ARGUMENT", message))
        elif kind == "hang":
            assert fault is not None
            time.sleep(fault.hang_s)
            self.close_connection = True
        elif kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
        elif kind == "malformed":
            self._send(200, b'{"candidates": [{"content": {"parts": [{"text": "trunc')
        else:
            try:
                reply = answer(state, body, fault)
                if state.usage and "usageMetadata" in reply:
                    meta = {**reply["usageMetadata"], **state.usage}
                    meta["totalTokenCount"] = sum(
                        meta[k]
                        for k in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
                    )
                    reply["usageMetadata"] = meta
                if self.seen is not None and "usageMetadata" in reply:
                    with state.lock:
                        self.seen.usage = dict(reply["usageMetadata"])
                        self.seen.images = pictures_in(reply)
                self._send(200, json.dumps(reply).encode())
            except BadRequest as exc:
                self._send(400, _error_body(400, "INVALID_ARGUMENT", str(exc)))

    def _control(self, path: str, state: FakeGemini) -> None:
        try:
            body = self._body()
            if path == "/_fake/faults":
                state.faults.push(**body)
            elif path == "/_fake/config":
                if "score" in body:
                    state.set_score(body["score"])
                for name, value in (body.get("fields") or {}).items():
                    state.set_field(name, value)
                if "usage" in body:
                    state.usage = dict(body["usage"])
                if "tts_format" in body:
                    state.tts_format = body["tts_format"]
                if "auth_error" in body:
                    state.auth_error = body["auth_error"]
                if "outage" in body:
                    state.outage = body["outage"]
                    state.outage_on = body.get("outage_on")
                if "models" in body:
                    state.models = list(body["models"])
                if "off_topic_every" in body:
                    state.off_topic_every = int(body["off_topic_every"])
            elif path == "/_fake/reset":
                state.reset()
            elif path == "/_fake/clear_faults":
                state.clear_faults()
            else:
                self._send(404, _error_body(404, "NOT_FOUND", "no such control"))
                return
        except (TypeError, ValueError) as exc:
            self._send(400, _error_body(400, "INVALID_ARGUMENT", str(exc)))
            return
        self._send(200, b"{}")
