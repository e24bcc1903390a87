"""Coverage of config options beyond the `set_config_option` answer: session modes and a `mode` config option kept
consistent (R98), and a `config_option_update` the agent sends carrying the complete config state (R128), like
that answer (R94)."""

from __future__ import annotations

from typing import Any

from ama_conformance.core.agent import Agent
from ama_conformance.core.values import arr, obj
from ama_conformance.groups.base import GroupContext, group
from ama_conformance.groups.options import select_values


def _ids(options: Any) -> list[str]:
    return [str(o.get("id")) for o in arr(options) if isinstance(o, dict)]


def _value(options: Any, option_id: Any) -> Any:
    return next((o.get("currentValue") for o in arr(options) if isinstance(o, dict) and o.get("id") == option_id), None)


def _selects(options: Any) -> list[dict[str, Any]]:
    return [o for o in arr(options) if isinstance(o, dict) and o.get("type") == "select"]


async def _modes_agree(ctx: GroupContext, agent: Agent, sid: str, result: dict[str, Any], rid: str) -> None:
    """With both `modes` and a `mode` config option, they name the same mode: at session/new, and after a
    `set_mode` (read in the complete list a `set_config_option` of another option answers, its value unchanged)."""
    c = ctx.checks
    state = obj(result.get("modes"))
    selects = _selects(result.get("configOptions"))
    mode_opt = next((o for o in selects if o.get("category") == "mode"), None)
    if mode_opt is None or not state:
        c.skip(rid, "session/new did not return both modes and a config option of category mode")
        return
    current = state.get("currentModeId")
    problems = []
    if mode_opt.get("currentValue") != current:
        problems.append(f"session/new: modes say {current!r}, the mode option {mode_opt.get('currentValue')!r}")
    with c.at(rid):
        other = next((o for o in selects if o is not mode_opt), None)
        if other is not None:
            problems += await _after_set_mode(agent, sid, state, mode_opt, other)
        c.check(rid, not problems, "; ".join(problems) or f"modes and the {mode_opt.get('id')!r} option agree")


async def _after_set_mode(
    agent: Agent, sid: str, state: dict[str, Any], mode_opt: dict[str, Any], other: dict[str, Any]
) -> list[str]:
    """A `set_mode` to another mode the option also offers, then the mode option's value in the answer to a
    `set_config_option` of `other` (set to its own value); the mode is set back after."""
    current = state.get("currentModeId")
    available = [m.get("id") for m in arr(state.get("availableModes")) if isinstance(m, dict)]
    target = next((m for m in available if m != current and m in select_values(mode_opt)), None)
    if target is None:
        return []
    await agent.call("session/set_mode", {"sessionId": sid, "modeId": target})
    params = {"sessionId": sid, "configId": other.get("id"), "value": other.get("currentValue")}
    now = _value((await agent.call("session/set_config_option", params)).get("configOptions"), mode_opt["id"])
    problems = [f"after set_mode {target!r} the mode option says {now!r}"] if now != target else []
    await agent.call("session/set_mode", {"sessionId": sid, "modeId": current})
    return problems


async def _updates_after(agent: Agent, sid: str, option: dict[str, Any], value: str) -> tuple[int, list[str]]:
    """Set `option` to `value`: how many config_option_updates followed, and each that lists fewer options than
    the answer does."""
    mark = agent.mark()
    answer = await agent.call(
        "session/set_config_option", {"sessionId": sid, "configId": option.get("id"), "value": value}
    )
    await agent.barrier()
    complete = set(_ids(answer.get("configOptions")))
    updates = agent.updates_since(mark, sid, frozenset({"config_option_update"}))
    problems = []
    for update in updates:
        missing = sorted(complete - set(_ids(update.get("configOptions"))))
        if missing:
            problems.append(f"setting {option.get('id')}={value!r} sent a config_option_update without {missing}")
    return len(updates), problems


@group("coverage-config", ("R98", "R128"))
async def coverage_config(ctx: GroupContext) -> None:
    """R98 first; then each select option is switched to another value, and every `config_option_update` that
    a change brings must list every option the change's own answer lists (the complete state at that moment)."""
    c = ctx.checks
    agent, sid, result = await ctx.opened()
    await _modes_agree(ctx, agent, sid, result, "R98")
    options = result.get("configOptions")
    if not isinstance(options, list) or not options:
        c.skip("R128", "session/new returned no configOptions")
        return
    problems: list[str] = []
    updates = 0
    with c.at("R128"):
        for option in _selects(options):
            others = [v for v in select_values(option) if v != option.get("currentValue")]
            for value in others[:1]:
                sent, missing = await _updates_after(agent, sid, option, value)
                updates, problems = updates + sent, problems + missing
        if not updates:
            c.skip("R128", "the agent sent no config_option_update")
        else:
            c.check(
                "R128", not problems, "; ".join(problems[:3]) or f"{updates} config_option_update(s), each complete"
            )
