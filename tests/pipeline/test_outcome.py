"""The turn's final error, chosen by the table of ``_outcome.py``: one error class per kind of failure, each naming
the endpoint and model it concerns, provider text redacted, and no entry (None) for what is not a model failure."""

from __future__ import annotations

import httpx2
import openai
import pytest

from acp_server.pipeline import (
    ModelHTTPError,
    ModelProviderError,
    ModelRateLimitedError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    ModelTurnError,
    StreamContentError,
    StreamInactivityTimeoutError,
    StreamLifetimeExceededError,
    StreamTruncatedError,
    classify_retry_error,
)
from acp_server.pipeline._outcome import Failure, Target, final_error

from ._mocks import connection_error, status_error

SECRET = "sk-secret-123456"
TARGET = Target("http://model.test:80/v1", "m")


def failure(exc: Exception, *, attempts: int = 1, note: str = "") -> Failure:
    return Failure(exc, classify_retry_error(exc), attempts, 2, "mid_stream", (SECRET,), TARGET, None, note)


@pytest.mark.parametrize(
    ("exc", "error_class", "error_kind"),
    [
        (StreamLifetimeExceededError(1_000, 3, 1_200.0), ModelStreamTimeoutError, "model_stream_timeout"),
        (StreamInactivityTimeoutError(500, 0, 500.0), ModelStreamTimeoutError, "model_stream_timeout"),
        (StreamTruncatedError(4), ModelTransportError, "model_transport_error"),
        (StreamContentError("empty", reason="empty_stream"), ModelStreamContentError, "model_stream_content"),
        (status_error(429, message=f"slow down {SECRET}"), ModelRateLimitedError, "model_rate_limited"),
        (connection_error(ConnectionRefusedError(111, "refused")), ModelTransportError, "model_transport_error"),
        (status_error(503, message=f"down {SECRET}"), ModelHTTPError, "model_http_error"),
        (
            openai.APIError(f"boom {SECRET}", httpx2.Request("POST", "http://x"), body=None),
            ModelProviderError,
            "model_provider_error",
        ),
    ],
)
def test_each_kind_of_failure_has_its_error_naming_what_it_concerns(
    exc: Exception, error_class: type[ModelTurnError], error_kind: str
) -> None:
    error = final_error(failure(exc, attempts=3, note="; a note"))
    assert type(error) is error_class and error.error_kind == error_kind
    assert (error.attempts, error.endpoint, error.model) == (3, TARGET.endpoint, TARGET.model)
    assert {"endpoint": TARGET.endpoint, "model": TARGET.model}.items() <= error.details().items()
    message = str(error)
    assert TARGET.named in message and message.endswith("; a note (gave up after 3 attempts)")
    assert SECRET not in message


def test_the_pipelines_own_failure_wins_over_its_classification() -> None:
    exc = StreamLifetimeExceededError(1_000, 3, 1_200.0)
    assert classify_retry_error(exc).kind == "transport"  # its ETIMEDOUT
    error = final_error(failure(exc))
    assert isinstance(error, ModelStreamTimeoutError) and error.max_lifetime_ms == 1_000
    assert "--stream-max-lifetime-ms" in str(error) and "gave up" not in str(error)


def test_what_is_not_a_model_failure_has_no_error() -> None:
    assert final_error(failure(ValueError("a bug"))) is None
