"""Reading Gemini's answers: a structured-output request, its JSON, safety blocks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mdame_domain.model_output import InvalidModelOutput

if TYPE_CHECKING:  # the SDK is imported with the first client (client.make_client)
    from google.genai import types

BLOCK_FINISH = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}


def short(text: Any, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def block_reason(response: types.GenerateContentResponse) -> str | None:
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        return f"prompt blocked: {enum_name(feedback.block_reason)}"
    for candidate in response.candidates or []:
        reason = enum_name(candidate.finish_reason) if candidate.finish_reason else ""
        if reason in BLOCK_FINISH:
            return f"answer blocked: finishReason {reason}"
    return None


def enum_name(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def response_json(response: types.GenerateContentResponse) -> Any:
    """The first candidate's JSON text, parsed; InvalidModelOutput when it is not JSON or the
    answer was cut short."""
    candidate = response.candidates[0] if response.candidates else None
    if candidate is None or candidate.content is None or not candidate.content.parts:
        raise InvalidModelOutput("the answer has no content")
    if enum_name(candidate.finish_reason) == "MAX_TOKENS":
        raise InvalidModelOutput("the answer was cut off at max_output_tokens")
    text = "".join(p.text or "" for p in candidate.content.parts)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidModelOutput(f"the answer is not JSON: {exc.msg}") from None


def json_config(
    system: str, schema: dict[str, Any], max_output_tokens: int, temperature: float
) -> types.GenerateContentConfig:
    """A structured-output request: the JSON schema travels in the request."""
    from google.genai import types

    return types.GenerateContentConfig(
        system_instruction=system,
        response_mime_type="application/json",
        response_json_schema=schema,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
    )
