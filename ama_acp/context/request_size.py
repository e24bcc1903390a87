"""The size of a whole model request, as the heuristic estimator sees it.

Two users: the meter's prefix (the tool declarations as they are sent) and the scripted provider, which
reports this figure as a request's input tokens (`usage = "auto"`), injected by the session so that the
providers never import the meter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from ama_acp.context.estimate import HeuristicEstimator
from ama_acp.conversation.messages import Message
from ama_acp.conversation.tools import ToolSpec


class RequestLike(Protocol):
    @property
    def system(self) -> str: ...

    @property
    def tools(self) -> Sequence[ToolSpec]: ...

    @property
    def messages(self) -> Sequence[Message]: ...


def tools_json(specs: Sequence[ToolSpec]) -> str:
    """The tool declarations as they are sent (name, description, JSON schema), for the prefix estimate."""
    return msgspec.json.encode(
        [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs]
    ).decode()


_heuristic = HeuristicEstimator()


def estimate_request(request: RequestLike) -> int:
    """The heuristic size of a whole request: what the scripted model reports as its input tokens."""
    total = _heuristic.text(request.system) + _heuristic.text(tools_json(request.tools))
    return total + sum(_heuristic.message(m) for m in request.messages)
