"""A local Gemini REST server that speaks the real wire protocol, for tests and the demo mode.

    POST /{version}/models/{model}:generateContent      (x-goog-api-key header, or ?key=)

Text: with generationConfig.responseMimeType application/json and a responseSchema (Gemini's
OpenAPI subset, types in capitals) or responseJsonSchema (JSON Schema), the answer is JSON that
follows the schema, generated deterministically from the request's contents (the user turns;
the system instruction is read for nothing but hints). A string whose description asks for
"N words" or "N-M words" gets that many words built from the prompt's own words; a number with
minimum 0 and maximum 1 gets a deterministic score in [0.75, 0.98] (tests override scores).
Every answer carries usageMetadata (prompt, candidates, thoughts and total token counts).

Image understanding: contents carrying inlineData image parts (what `types.Part.from_bytes`
sends, base64url) beside the text, with responseMimeType application/json and a schema, are
answered {"score": 0..1, "reason": str} by fakes/imagery.judge(images, narration): the narration
is the text of the request's `Narration: ...` line (a data block's field), else all of its text.
Each image bills IMAGE_TILE_TOKENS prompt tokens per 768-px tile (one tile when both sides are
at most 384 px), as Gemini counts them; set_score and set_field override the answer too.

Image generation: responseModalities ["IMAGE"] (with imageConfig.aspectRatio, 1:1 when absent)
is answered with one inlineData image/png drawn by fakes/imagery.picture_png of the prompt's
subject (imagery.depicted_word) at that aspect ratio, small (9:16: 288x512), billed
IMAGE_OUTPUT_TOKENS output tokens (usageMetadata.candidatesTokensDetails says IMAGE), as Gemini
bills a 1K image. An unknown aspect ratio is a 400. Off-topic pictures, for the relevance gate:
the fault "off_topic" draws another subject (off_topic_word: the farthest in colour from every
word of the prompt) for one request, and `server.off_topic_every = N` (POST /_fake/config
{"off_topic_every": N}) does so for the first request of one prompt in N (by its hash), the
same prompt asked again being drawn as asked. For an image request, "max_tokens" answers no
image (finishReason MAX_TOKENS) and "schema" a text part instead of the image.

TTS: responseModalities ["AUDIO"] with speechConfig's prebuilt voice gives inlineData audio
made by espeak-ng: raw 16-bit PCM at 24 kHz (`audio/L16;codec=pcm;rate=24000`) by default,
or a WAV file (`audio/wav`) when the server's tts_format is "wav".

Faults, a FIFO consumed one per generateContent request (in process: `server.faults.push(...)`;
over HTTP: POST /_fake/faults {"kind": ..., ...}):
  "429" (Retry-After: retry_after), "500", "503", "hang" (read the request, answer nothing for
  hang_s), "drop" (read the request, close the connection), "malformed" (200 with a body that
  is not JSON), "schema" (200 with JSON that breaks the requested schema), "safety" (prompt
  blocked: promptFeedback.blockReason), "safety_finish" (a candidate with finishReason SAFETY),
  "empty" (no candidates), "max_tokens" (finishReason MAX_TOKENS, truncated text), "400"
  (INVALID_ARGUMENT), "off_topic" (an image request only: another subject drawn), "hold"
  (read the request and hold it, the request in flight, until `server.release_held()` or
  hang_s, then answer it as asked and bill it, whether its client is still there or not;
  `server.held()` counts the requests held). A fault with `on` ("text", "audio", "image" or
  "judge": text with images to understand) fires only on that kind of request, the first such
  fault in the queue; one without fires on any.
An outage: `server.outage = 503` (or POST /_fake/config {"outage": 503}) answers every
generateContent request with that 5xx status until reset; `server.outage_on = "image"` (or
{"outage_on": "image"} beside it) limits it to that kind of request (an image model's outage).
A model not in `server.models` is answered 404 NOT_FOUND, as Google answers a model it does not
serve.
Scores and fields: `server.set_score(x)` / POST /_fake/config {"score": x} makes every 0-1
number x; `server.set_field(name, value)` / {"fields": {...}} forces a property by name (for
example {"allowed": false}). GET /_fake/requests returns the requests seen (model, kind, body
without the key, the status answered and the usage billed). GET /_fake/counters sums them up
(what a ledger is checked against): requests per status, and every billed answer's model, kind
(text, audio or image), usageMetadata and the pictures it carried (an image model bills each),
with their total ("images"). POST /_fake/clear_faults empties the queue, ends an outage and
answers the held requests, keeping what was seen. The API key is checked for presence only and
never stored.

Model list (what `client.models.list()` asks): GET /{version}/models answers the names in
`server.models` (pageSize and pageToken honoured). One model (`client.models.get(model=...)`,
what `mdame doctor` asks per configured model): GET /{version}/models/{model} answers its Model
resource, or 404 NOT_FOUND for a name not in `server.models`; it takes the next fault too, and
answers 429, 500, 503, hang and drop as generateContent does (any other kind is used up).
A refused key: `server.auth_error = 401` (or POST /_fake/config {"auth_error": 401}) answers
every API request with that status (401 UNAUTHENTICATED, 403 PERMISSION_DENIED) until reset.

    python -m fakes.gemini --port 8089 [--tts-format wav]

The package is split by concern: `state` (faults, what a test forces, the requests seen),
`protocol` (reading a request, usageMetadata), the answers (`generator`: text and JSON by
schema, `speech`, `pictures`: image generation, `judge`: image understanding, routed in
`answer`), `handler` (the routes, faults and controls), `server` (`running`) and `cli`.
"""

from __future__ import annotations

from fakes.gemini.answer import answer
from fakes.gemini.cli import main
from fakes.gemini.judge import IMAGE_TILE_TOKENS
from fakes.gemini.pictures import (
    ASPECT_RATIOS,
    IMAGE_OUTPUT_TOKENS,
    PICTURE_LONG_SIDE,
    off_topic_word,
    picture_size,
)
from fakes.gemini.server import running
from fakes.gemini.speech import AUDIO_TOKENS_PER_SECOND, PCM_MIME, SAMPLE_RATE, espeak_pcm
from fakes.gemini.state import (
    DEFAULT_MODELS,
    FAULT_KINDS,
    REQUEST_KINDS,
    FakeGemini,
    Fault,
    FaultQueue,
    SeenRequest,
)

__all__ = [
    "ASPECT_RATIOS",
    "AUDIO_TOKENS_PER_SECOND",
    "DEFAULT_MODELS",
    "FAULT_KINDS",
    "FakeGemini",
    "Fault",
    "FaultQueue",
    "IMAGE_OUTPUT_TOKENS",
    "IMAGE_TILE_TOKENS",
    "PCM_MIME",
    "PICTURE_LONG_SIDE",
    "REQUEST_KINDS",
    "SAMPLE_RATE",
    "SeenRequest",
    "answer",
    "espeak_pcm",
    "main",
    "off_topic_word",
    "picture_size",
    "running",
]
