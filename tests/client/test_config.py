"""The SDK and session config options: ``set_config_option`` (model and mode) end to end, the typed
``config_changed`` event, ``Capabilities.models``."""

from __future__ import annotations

import pytest

from acp_server.client import (
    ConfigChangedEvent,
    DaemonClient,
    DaemonInvalidRequestError,
    DaemonSessionClient,
    DaemonSessionNotFoundError,
    ModeChangedEvent,
    PromptAcceptedEvent,
    SessionConfig,
)
from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel

from ._support import running_daemon

pytestmark = pytest.mark.anyio

TOKEN = "sdk-token"
PICKABLE = Settings(models=("m", "big"))


async def test_a_model_picked_through_the_client_is_used_by_the_next_request() -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, settings=PICKABLE, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
    ):
        capabilities = await client.capabilities()
        assert (capabilities.models, capabilities.default_model_id) == (("m", "big"), "m")
        session_id = await client.create_session("/tmp")
        async with client.events(session_id) as events:
            config = await client.set_config_option(session_id, "model", "big")
            assert isinstance(config, SessionConfig)
            assert (config.session_id, config.mode_id, config.model_id) == (session_id, "default", "big")
            model_option = config.option("model")
            assert model_option is not None and model_option.category == "model"
            assert (model_option.current_value, model_option.values) == ("big", ("m", "big"))
            changed = await events.__anext__()
            assert isinstance(changed, ConfigChangedEvent)
            assert (changed.current("model"), changed.current("mode")) == ("big", "default")
            with pytest.raises(DaemonInvalidRequestError) as refused:
                await client.set_config_option(session_id, "model", "nope")
            assert refused.value.details[0]["field"] == "value"
            model.enqueue(Answer(text="hi"))
            assert (await client.prompt(session_id, "hello", wait=True)).stop_reason == "end_turn"
            assert isinstance(await events.__anext__(), PromptAcceptedEvent)  # the refusal published nothing
        assert model.requests[-1].body["model"] == "big"
        with pytest.raises(DaemonSessionNotFoundError):
            await client.set_config_option("nope", "model", "big")


async def test_the_session_client_sets_the_mode_option_like_set_mode() -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, settings=PICKABLE, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
        await DaemonSessionClient.create_or_attach(client, "/tmp") as session,
    ):
        async with client.events(session.session_id) as events:
            config = await session.set_config_option("mode", "read-only")
            assert config.mode_id == "read-only" and config.model_id == "m"
            mode_option = config.option("mode")
            assert mode_option is not None and mode_option.current_value == "read-only"
            mode_changed, config_changed = await events.__anext__(), await events.__anext__()
            assert isinstance(mode_changed, ModeChangedEvent) and mode_changed.mode_id == "read-only"
            assert isinstance(config_changed, ConfigChangedEvent)
            assert config_changed.current("mode") == "read-only"
            with pytest.raises(DaemonInvalidRequestError) as refused:
                await session.set_config_option("colour", "blue")
            assert refused.value.details[0]["field"] == "configId"
        assert await session.set_mode("accept-edits") == "accept-edits"
        assert served.bridge.get(session.session_id).mode == "accept-edits"
