"""The public surface, the error tree and its wire details, the policy's validation, the retry arithmetic."""

from __future__ import annotations

import math

import pytest

import acp_server.pipeline as pipeline
from acp_server.errors import ServerError
from acp_server.pipeline import (
    ModelHTTPError,
    ModelProviderError,
    ModelRateLimitedError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    ModelTurnError,
    PipelineError,
    RetryClassification,
    StreamContentError,
    StreamInactivityTimeoutError,
    StreamLifetimeExceededError,
    StreamPolicy,
    StreamTimeoutError,
)
from acp_server.pipeline._exceptions import redact
from acp_server.pipeline._retry import RetryBudget, backoff_delay_s


def test_public_surface_is_pinned_and_sorted() -> None:
    assert pipeline.__all__ == sorted(pipeline.__all__, key=lambda name: (not name.isupper(), name))  # isort-style
    assert set(pipeline.__all__) == {
        "ChatRequest",
        "DEFAULT_IDLE_TIMEOUT_MS",
        "DEFAULT_MAX_LIFETIME_MS",
        "Delta",
        "Finished",
        "ModelHTTPError",
        "ModelProviderError",
        "ModelRateLimitedError",
        "ModelStreamContentError",
        "ModelStreamTimeoutError",
        "ModelTransportError",
        "ModelTurnError",
        "PipelineError",
        "RequestEncoder",
        "RetryClassification",
        "RetryEvent",
        "StreamContentError",
        "StreamEvent",
        "StreamInactivityTimeoutError",
        "StreamLifetimeExceededError",
        "StreamPolicy",
        "StreamTimeoutError",
        "StreamTruncatedError",
        "ToolCallFragment",
        "classify_retry_error",
        "run_chat",
        "stream_chat",
    }
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None


def test_error_tree() -> None:
    assert issubclass(PipelineError, ServerError)
    for cls in (StreamTimeoutError, StreamContentError, ModelTurnError):
        assert issubclass(cls, PipelineError)
    for cls in (StreamInactivityTimeoutError, StreamLifetimeExceededError):
        assert issubclass(cls, StreamTimeoutError)
        assert cls.code == "ETIMEDOUT"
    kinds = {
        ModelStreamTimeoutError: "model_stream_timeout",
        ModelTransportError: "model_transport_error",
        ModelRateLimitedError: "model_rate_limited",
        ModelHTTPError: "model_http_error",
        ModelStreamContentError: "model_stream_content",
        ModelProviderError: "model_provider_error",
    }
    for cls, kind in kinds.items():
        assert issubclass(cls, ModelTurnError)
        assert cls.error_kind == kind


def test_inactivity_error_details() -> None:
    err = StreamInactivityTimeoutError(200, 0, 200.4)
    assert str(err) == "No stream activity for 200ms (inactivity timeout)"
    assert err.retryable is True
    assert err.details() == {
        "transportCode": "ETIMEDOUT",
        "phase": "before_first_chunk",
        "chunksReceived": 0,
        "streamLifetimeMs": 200,
        "idleMs": 200,
    }


def test_turn_error_details_omit_unknown_optional_keys() -> None:
    err = ModelTransportError(
        "x", attempts=3, chunks_received=0, retryable=True, phase="request", transport_code="ECONNREFUSED"
    )
    assert err.details() == {
        "transportCode": "ECONNREFUSED",
        "phase": "request",
        "attempts": 3,
        "chunksReceived": 0,
        "retryable": True,
    }
    bare = ModelProviderError("x", attempts=1, chunks_received=2, retryable=False)
    assert bare.details() == {"attempts": 1, "chunksReceived": 2, "retryable": False}
    assert bare.retryable is False


def test_details_are_json_values_only() -> None:
    import json

    errors: list[ServerError] = [
        ModelStreamTimeoutError("x", attempts=3, chunks_received=0, phase="before_first_chunk", idle_ms=200),
        ModelRateLimitedError("x", attempts=5, retry_after_ms=1000.4),
        ModelHTTPError("x", attempts=1, chunks_received=0, retryable=False, phase="request", status=401),
        ModelStreamContentError(
            "x", attempts=1, chunks_received=0, retryable=False, reason="non_sse", content_type="text/html"
        ),
        StreamContentError("x", reason="empty_stream"),
        StreamLifetimeExceededError(1000, 5, 1000),
    ]
    for err in errors:
        assert json.loads(json.dumps(err.details())) == err.details()


def test_redact_hides_secrets_and_bounds_length() -> None:
    assert redact("key sk-abcdef used", ["sk-abcdef"]) == "key *** used"
    assert redact("short k", ["k"]) == "short k"  # too short to be a secret worth hiding
    assert redact("x", [None]) == "x"
    long = redact("a" * 1000)
    assert len(long) == 300 and long.endswith("…")


# --- StreamPolicy ---


def test_policy_defaults() -> None:
    p = StreamPolicy()
    assert (p.idle_timeout_ms, p.max_lifetime_ms) == (120_000, 900_000)
    assert (p.stream_max_retries, p.stream_retry_delays_ms) == (2, (1_000, 2_000))
    assert (p.backoff_max_retries, p.backoff_initial_ms, p.backoff_max_ms, p.backoff_jitter) == (
        4,
        1_500,
        30_000,
        0.3,
    )
    assert p.retry_after_cap_ms == 300_000
    assert p.server_error_wait_ms == 6_000
    assert p.finish_grace_ms == 1_000
    assert (p.content_max_retries, p.content_retry_delay_ms) == (1, 500)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"idle_timeout_ms": math.nan},
        {"max_lifetime_ms": math.nan},
        {"stream_max_retries": -1},
        {"backoff_max_retries": 1.5},
        {"content_max_retries": True},
        {"stream_retry_delays_ms": (-1.0,)},
        {"stream_retry_delays_ms": ()},
        {"backoff_initial_ms": math.inf},
        {"backoff_jitter": 1.5},
        {"close_timeout_ms": 0},
        {"finish_grace_ms": -1},
        {"finish_grace_ms": math.inf},
        {"server_error_wait_ms": -1},
        {"server_error_wait_ms": math.inf},
    ],
)
def test_policy_rejects_invalid_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        StreamPolicy(**kwargs)  # type: ignore[arg-type]


def test_disabled_timers_are_valid() -> None:
    StreamPolicy(idle_timeout_ms=0, max_lifetime_ms=-5)
    StreamPolicy(idle_timeout_ms=math.inf)


# --- retry arithmetic ---


def test_backoff_delay_doubles_caps_and_jitters() -> None:
    mid = StreamPolicy(jitter_source=lambda: 0.5)
    assert [backoff_delay_s(n, mid) for n in range(1, 7)] == [1.5, 3.0, 6.0, 12.0, 24.0, 30.0]
    low = StreamPolicy(jitter_source=lambda: 0.0)
    high = StreamPolicy(jitter_source=lambda: 0.999999)
    assert backoff_delay_s(1, low) == pytest.approx(1.05)
    assert backoff_delay_s(1, high) == pytest.approx(1.95, rel=1e-5)


def test_server_error_waits_are_cut_to_the_turns_allowance_then_the_error_is_final() -> None:
    budget = RetryBudget(StreamPolicy(jitter_source=lambda: 0.5))
    server = RetryClassification("http", "retryable", "server error (HTTP 500)", status=500)
    delays = [decision.delay_s for decision in iter(lambda: budget.decide(server, yielded=False), None)]
    assert delays == [1.5, 3.0, 1.5]  # the third wait (6 s computed) is cut to the 1.5 s left of 6 s
    high = RetryBudget(StreamPolicy(jitter_source=lambda: 0.999999))  # the longest jitter still fits
    assert sum(d.delay_s for d in iter(lambda: high.decide(server, yielded=False), None)) == pytest.approx(6.0)
    asked = RetryBudget(StreamPolicy(jitter_source=lambda: 0.5))  # a Retry-After is the provider's: its own cap
    assert [asked.decide(server, yielded=False, retry_after_s=5).delay_s for _ in range(4)] == [5] * 4  # type: ignore[union-attr]
    transport = RetryClassification("transport", "retryable", "r", transport_code="EHOSTUNREACH")
    other = RetryBudget(StreamPolicy(jitter_source=lambda: 0.5))
    assert [d.delay_s for d in iter(lambda: other.decide(transport, yielded=False), None)] == [1.5, 3.0, 6.0, 12.0]


def test_budget_consumes_and_is_bounded_per_policy() -> None:
    budget = RetryBudget(StreamPolicy(jitter_source=lambda: 0.5))
    reset = RetryClassification("transport", "retryable", "r", transport_code="ECONNRESET")
    assert [budget.decide(reset, yielded=False) for _ in range(3)] == [
        pipeline._retry.RetryDecision("stream_transport", 1, 1.0),
        pipeline._retry.RetryDecision("stream_transport", 2, 2.0),
        None,
    ]
    assert budget.decide(reset, yielded=True) is None
    limited = RetryClassification("rate_limit", "retryable", "r", status=429)
    assert budget.decide(limited, yielded=False, retry_after_s=1000) is None  # longer than the cap: not waited
    assert budget.retry_after_refused
    assert budget.decide(limited, yielded=False, retry_after_s=200).delay_s == 200  # type: ignore[union-attr]
    assert not budget.retry_after_refused
    assert budget.decide(limited, yielded=False, retry_after_s=101) is None  # 99 s of the 300 s are left
    assert budget.retry_after_refused
    assert budget.decide(limited, yielded=False, retry_after_s=99).delay_s == 99  # type: ignore[union-attr]
    assert budget.decide(RetryClassification("abort", "fail-fast", "c"), yielded=False) is None
    assert budget.decide(RetryClassification("unknown", "unknown", "?"), yielded=False) is None
