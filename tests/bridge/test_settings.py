"""The bridge's settings rules, the one owner every face asks: which modes and models a session may have here, the
mode it reads as, which config options exist, and the field-naming refusal of anything else (nothing changed)."""

from __future__ import annotations

import pytest

from acp_server.bridge import Choice, SessionBridge, SettingsChange, SettingsRules
from acp_server.errors import InvalidInputError
from acp_server.turn import ModelCatalog

from ._support import ScriptedRunner

pytestmark = pytest.mark.anyio

SAFE = ("default", "accept-edits", "read-only")


def test_for_field_is_the_one_shape_of_a_field_refusal() -> None:
    refused = InvalidInputError.for_field("value", "unknown model 'x'")
    assert str(refused) == "value: unknown model 'x'"
    assert refused.errors == [{"field": "value", "message": "unknown model 'x'"}]
    assert refused.details() == {"errors": refused.errors}
    worded = InvalidInputError.for_field("value", "bad", "Invalid params for m: value: bad")
    assert str(worded) == "Invalid params for m: value: bad"
    assert worded.errors == [{"field": "value", "message": "bad"}]


def test_modes_offered_and_the_mode_a_session_reads_as() -> None:
    rules = SettingsRules("read-only", SAFE, None)
    assert [mode.id for mode in rules.offered] == list(SAFE)
    assert rules.mode_of("accept-edits") == "accept-edits"
    assert rules.mode_of("bypass-permissions") == "read-only"  # no longer allowed: the bridge's default
    assert rules.mode_of(None) == "read-only"


@pytest.mark.parametrize(
    ("offered_by", "value", "problem"),
    [
        (None, "no-such", "unknown mode 'no-such'; available: default, accept-edits, read-only"),
        (None, "bypass-permissions", "unknown mode 'bypass-permissions'; available: default, accept-edits, read-only"),
        ("this daemon", "no-such", "unknown mode 'no-such'; available: default, accept-edits, read-only"),
        (
            "this daemon",
            "bypass-permissions",
            "mode 'bypass-permissions' is not offered by this daemon; available: default, accept-edits, read-only",
        ),
        (None, 7, "unknown mode 7; available: default, accept-edits, read-only"),
    ],
)
def test_a_mode_not_offered_is_refused_naming_the_field(offered_by: str | None, value: object, problem: str) -> None:
    rules = SettingsRules("default", SAFE, None)
    with pytest.raises(InvalidInputError) as refused:
        rules.offered_mode(value, "modeId", offered_by=offered_by)
    assert str(refused.value) == f"modeId: {problem}"
    assert refused.value.errors == [{"field": "modeId", "message": problem}]
    assert rules.offered_mode("read-only") == "read-only"


def test_models_and_config_options() -> None:
    rules = SettingsRules("default", None, ModelCatalog("m1", ("m1", "m2")))
    assert rules.config_choice("model", "m2") == Choice("model", "m2")
    assert rules.config_choice("mode", "bypass-permissions") == Choice("mode", "bypass-permissions")  # any mode
    with pytest.raises(InvalidInputError) as model:
        rules.config_choice("model", "m3")
    assert model.value.errors == [{"field": "value", "message": "unknown model 'm3'; available: m1, m2"}]
    with pytest.raises(InvalidInputError) as option:
        rules.config_choice("colour", "red")
    assert str(option.value) == "configId: unknown config option 'colour'; available: mode, model"
    no_choice = SettingsRules("default", None, None)
    with pytest.raises(InvalidInputError) as no_model:
        no_choice.config_choice("model", "m1")
    assert no_model.value.errors == [{"field": "configId", "message": "unknown config option 'model'; available: mode"}]
    assert no_choice.model_problem("m1") == "unknown model 'm1'; available: (no model choice here)"


async def test_a_change_is_checked_before_the_session_is_looked_up_and_a_refusal_changes_nothing() -> None:
    changes: list[SettingsChange] = []
    async with SessionBridge(ScriptedRunner(), modes=SAFE, models=ModelCatalog("m1", ("m1", "m2"))) as bridge:
        bridge.add_settings_listener(changes.append)
        entry = await bridge.open_session("/tmp")
        readied: list[str] = []
        with pytest.raises(InvalidInputError):  # the value first: even an unknown session gets the field's refusal
            await bridge.change_setting("nope", bridge.settings.config_choice("model", "m3"), before=readied.append)
        assert readied == [] and changes == [] and entry.model is None
        choice = bridge.settings.config_choice("model", "m2")
        origin = object()
        assert await bridge.change_setting(entry.session_id, choice, origin=origin, before=readied.append) is entry
        assert readied == [entry.session_id]  # told before the change, so a face hears it
        assert entry.model == "m2" and [(c.setting, c.origin) for c in changes] == [("model", origin)]
        record = await bridge.store.get_session(entry.session_id)
        assert record is not None and record.model == "m2"
