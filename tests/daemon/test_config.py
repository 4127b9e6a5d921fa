"""Session config options over REST (``POST /session/{id}/config``): the model picker and the mode, as over ACP."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.acp import model as acp_model
from acp_server.config import Settings
from acp_server.provider.offline import Answer, LoopbackModel

from ._support import EventReader, Served, assert_documented, running_daemon

pytestmark = pytest.mark.anyio

CONFIG = "/session/{sessionId}/config"
TOKEN = "s3cret-token"
PICKABLE = Settings(models=("m", "big"))


async def set_config(served: Served, session_id: str, config_id: str, value: Any) -> Any:
    response = await served.client.post(f"/session/{session_id}/config", json={"configId": config_id, "value": value})
    assert_documented("POST", CONFIG, response)
    return response


def current(options: list[dict[str, Any]]) -> dict[str, str]:
    return {option["id"]: option["currentValue"] for option in options}


async def test_capabilities_and_session_answers_name_the_models() -> None:
    async with LoopbackModel() as model, running_daemon(model, settings=PICKABLE) as served:
        capabilities = (await served.client.get("/capabilities")).json()
        assert capabilities["models"] == {"defaultModelId": "m", "availableModels": ["m", "big"]}
        assert "session.config" in capabilities["features"]
        created = await served.client.post("/session", json={"cwd": "/tmp"})
        assert created.json()["modelId"] == "m"
        assert_documented("POST", "/session", created)


async def test_a_model_set_over_rest_is_answered_published_stored_and_used_by_the_next_request() -> None:
    async with LoopbackModel() as model, running_daemon(model, settings=PICKABLE) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            same = await set_config(served, session_id, "model", "m")  # no change: no event
            assert same.status_code == 200 and current(same.json()["configOptions"]) == {
                "mode": "read-only",
                "model": "m",
            }
            picked = await set_config(served, session_id, "model", "big")
            assert picked.status_code == 200
            body = picked.json()
            assert (body["sessionId"], body["modeId"], body["modelId"]) == (session_id, "read-only", "big")
            # The same shape as ACP's session/set_config_option answer.
            acp_model("SetSessionConfigOptionResponse").model_validate({"configOptions": body["configOptions"]})
            mode_option, model_option = body["configOptions"]
            assert model_option["category"] == "model" and model_option["currentValue"] == "big"
            assert [o["value"] for o in model_option["options"]] == ["m", "big"]
            assert mode_option["category"] == "mode"
            changed = await events.next()
            assert changed.event == "config_changed"
            assert changed.data == {"sessionId": session_id, "configOptions": body["configOptions"]}
            model.enqueue(Answer(text="hi"))
            assert (await served.prompt(session_id, wait="true")).status_code == 200
            assert (await events.next()).event == "prompt_accepted"  # nothing else was published
        assert model.requests[-1].body["model"] == "big"
        record = await served.bridge.store.get_session(session_id)
        assert record is not None and record.model == "big"
        # Resumed: the stored choice is the session's model.
        assert (await served.client.delete(f"/session/{session_id}")).status_code == 204
        resumed = await served.client.post(f"/session/{session_id}/resume", json={})
        assert resumed.json()["modelId"] == "big"


@pytest.mark.parametrize(
    ("config_id", "value", "field"),
    [("model", "nope", "value"), ("colour", "m", "configId"), ("mode", "bypass-permissions", "value")],
)
async def test_an_unknown_option_or_value_is_400_naming_the_field_and_changes_nothing(
    config_id: str, value: str, field: str
) -> None:
    async with LoopbackModel() as model, running_daemon(model, settings=PICKABLE) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            refused = await set_config(served, session_id, config_id, value)
            assert refused.status_code == 400
            assert refused.json()["code"] == "invalid_request"
            assert [d["field"] for d in refused.json()["details"]] == [field]
            model.enqueue(Answer(text="hi"))
            assert (await served.prompt(session_id, wait="true")).status_code == 200
            assert (await events.next()).event == "prompt_accepted"  # no config_changed / mode_changed
        assert model.requests[-1].body["model"] == "m"
        entry = served.bridge.get(session_id)
        assert (entry.model, entry.mode) == (None, "read-only")


async def test_a_malformed_body_or_an_unknown_session_is_refused() -> None:
    async with running_daemon(None, settings=PICKABLE) as served:
        session_id = await served.new_session()
        not_a_string = await set_config(served, session_id, "model", 3)
        assert not_a_string.status_code == 400 and not_a_string.json()["details"][0]["field"] == "value"
        missing = await served.client.post(f"/session/{session_id}/config", json={"value": "m"})
        assert missing.status_code == 400 and missing.json()["details"][0]["field"] == "configId"
        unknown = await set_config(served, "nope", "model", "big")
        assert unknown.status_code == 404 and unknown.json()["code"] == "session_not_found"


async def expect_mode_change(events: EventReader, session_id: str, mode_id: str) -> None:
    mode_changed, config_changed = await events.next(), await events.next()
    assert (mode_changed.event, mode_changed.data) == ("mode_changed", {"sessionId": session_id, "modeId": mode_id})
    assert config_changed.event == "config_changed"
    assert current(config_changed.data["configOptions"])["mode"] == mode_id


async def test_the_mode_option_and_the_mode_route_are_one_mode() -> None:
    async with LoopbackModel() as model, running_daemon(model, settings=PICKABLE, token=TOKEN) as served:
        session_id = await served.new_session()
        async with served.events(session_id) as events:
            by_config = await set_config(served, session_id, "mode", "accept-edits")
            assert by_config.status_code == 200
            assert by_config.json()["modeId"] == "accept-edits"
            assert current(by_config.json()["configOptions"]) == {"mode": "accept-edits", "model": "m"}
            await expect_mode_change(events, session_id, "accept-edits")
            by_route = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "read-only"})
            assert by_route.json() == {"sessionId": session_id, "modeId": "read-only", "modelId": "m"}
            await expect_mode_change(events, session_id, "read-only")
            options = served.daemon.config_options(session_id)
            assert current(options) == {"mode": "read-only", "model": "m"}
            offered = [o["value"] for o in options[0]["options"]]
            capabilities = (await served.client.get("/capabilities")).json()
            assert offered == [m["id"] for m in capabilities["modes"]["availableModes"]]
        record = await served.bridge.store.get_session(session_id)
        assert record is not None and record.mode == "read-only"
