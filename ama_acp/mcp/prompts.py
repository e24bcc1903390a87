"""An MCP server's prompts as slash commands: the listing bounded, a person's argument line parsed, and a
prompts/get result made into the parts of one user message (docs/commands.md "MCP prompts and resources").

Everything here reads JSON already decoded (the SDK's models dumped by alias) as hostile input: an entry of the
wrong shape is left out with a line for the log, a field too long is cut with a marker, and nothing raises.
"""

from __future__ import annotations

import shlex

import msgspec

from ama_acp.conversation.messages import ImagePart, TextPart
from ama_acp.mcp.results import is_base64_image, str_or_none
from ama_acp.mcp.tools import clip_description, named_entries, wire_names

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_PROMPT_CHARS",
    "MAX_PROMPTS_PER_SERVER",
    "McpPrompt",
    "PromptArgument",
    "parse_arguments",
    "prompt_parts",
    "prompts_from_listing",
]

# A server offering more than this is broken or hostile: each prompt is a line of the editor's command menu.
MAX_PROMPTS_PER_SERVER = 200
# Arguments of one prompt kept (the rest are left out of its hint; the server gets only what is kept).
MAX_ARGUMENTS = 20
MAX_NAME = 128  # characters of a prompt's or an argument's own name; a longer one is not a name a person types
DESCRIPTION_BUDGET = 300  # characters of a prompt's description in the command menu
ARGUMENT_DESCRIPTION_BUDGET = 120
# What one prompts/get may put into the conversation: its messages' text, in characters (about 50K tokens), and
# how many messages and content items are read. Past these the rest is cut with a marker the model reads.
MAX_PROMPT_CHARS = 200_000
MAX_PROMPT_ITEMS = 256
MAX_IMAGES = 8


class PromptArgument(msgspec.Struct, frozen=True):
    name: str
    description: str = ""
    required: bool = False


class McpPrompt(msgspec.Struct, frozen=True):
    server: str
    name: str  # the server's own name: what prompts/get sends
    command: str  # the slash command's name, `mcp__<server>__<prompt>` (the tools' wire-name rule)
    description: str
    arguments: list[PromptArgument]

    @property
    def hint(self) -> str | None:
        """The command's `input.hint`: the argument names in order, optional ones in brackets."""
        if not self.arguments:
            return None
        return " ".join(a.name if a.required else f"[{a.name}]" for a in self.arguments)


def prompts_from_listing(server: str, raw_prompts: object, taken: set[str]) -> tuple[list[McpPrompt], list[str]]:
    """The entries of a prompts/list result → McpPrompts (command names not in `taken`), in the server's order;
    and a line for the log about each entry left out."""
    if not isinstance(raw_prompts, list):
        return [], ["the prompt list is not a list"]
    dropped: list[str] = []
    entries = named_entries(raw_prompts, "prompt", MAX_PROMPTS_PER_SERVER, dropped, MAX_NAME)
    commands = wire_names(server, [name for name, _ in entries], taken)
    prompts = [
        _prompt(server, command, name, raw, dropped) for command, (name, raw) in zip(commands, entries, strict=True)
    ]
    return prompts, dropped


def _prompt(server: str, command: str, name: str, raw: dict[str, object], dropped: list[str]) -> McpPrompt:
    description = raw.get("description")
    title = raw.get("title")
    text = description if isinstance(description, str) and description else title if isinstance(title, str) else ""
    return McpPrompt(
        server=server,
        name=name,
        command=command,
        description=clip_description(
            " ".join(text.split()) or f"MCP prompt {name[:80]!r} of {server[:80]!r}", DESCRIPTION_BUDGET
        ),
        arguments=_arguments(name, raw.get("arguments"), dropped),
    )


def _arguments(prompt: str, raw: object, dropped: list[str]) -> list[PromptArgument]:
    """A prompt's arguments kept as the server's prompts are (`named_entries`: a usable name, the first of a name
    listed twice, at most MAX_ARGUMENTS), each said in `dropped` when left out."""
    if not isinstance(raw, list):
        return []
    kind = f"argument of prompt {prompt[:80]!r}"
    return [
        PromptArgument(
            name=name,
            description=clip_description(d, ARGUMENT_DESCRIPTION_BUDGET)
            if isinstance(d := item.get("description"), str)
            else "",
            required=item.get("required") is True,
        )
        for name, item in named_entries(raw, kind, MAX_ARGUMENTS, dropped, MAX_NAME)
    ]


def parse_arguments(prompt: McpPrompt, line: str) -> dict[str, str] | str:
    """A person's argument line → the prompt's arguments (a dict), or a sentence saying why not (a str).

    Split as a POSIX shell splits words (quotes group, a backslash escapes; nothing is expanded or run), then
    given to the arguments in their declared order; the words past the last argument join it, so the last one
    takes free text without quotes. A required argument with no word is an error, as is a word for a prompt
    that takes none.
    """
    try:
        words = shlex.split(line, comments=False, posix=True)
    except ValueError as exc:  # an unclosed quote, a backslash at the end
        return f'Could not read the arguments of /{prompt.command}: {exc} (quote a value with spaces: "two words").'
    names = [a.name for a in prompt.arguments]
    if words and not names:
        return f"/{prompt.command} takes no arguments."
    values: dict[str, str] = {}
    for index, name in enumerate(names):
        if index >= len(words):
            break
        values[name] = " ".join(words[index:]) if index == len(names) - 1 else words[index]
    missing = [a.name for a in prompt.arguments if a.required and a.name not in values]
    if missing:
        return f"/{prompt.command} needs {_listed(missing)}: type /{prompt.command} {prompt.hint or ''}".rstrip() + "."
    return values


def _listed(names: list[str]) -> str:
    shown = [f"`{name}`" for name in names]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


class _Budget:
    """What is left of the prompt's room, in characters and images, as its items are read."""

    def __init__(self) -> None:
        self.chars = MAX_PROMPT_CHARS
        self.images = MAX_IMAGES
        self.cut = 0  # characters left out

    def take(self, text: str) -> str:
        if len(text) <= self.chars:
            self.chars -= len(text)
            return text
        kept = text[: self.chars]
        self.cut += len(text) - len(kept)
        self.chars = 0
        return kept


def prompt_parts(raw: object, prompt: str) -> list[TextPart | ImagePart]:
    """A GetPromptResult as JSON → the parts of the turn's user message (never none). Never raises.

    Each message's content in order; a message in the assistant's role is introduced as such (it cannot be the
    model's own turn: the turn is the person's); text beyond MAX_PROMPT_CHARS is cut with a marker.
    """
    messages = raw.get("messages") if isinstance(raw, dict) else None
    if not isinstance(messages, list) or not messages:
        return [TextPart(f"(MCP prompt {prompt[:80]!r} returned no messages)")]
    budget = _Budget()
    parts: list[TextPart | ImagePart] = []
    for message in messages[:MAX_PROMPT_ITEMS]:
        if not isinstance(message, dict):
            parts.append(TextPart("(a prompt message that is not an object)"))
            continue
        if message.get("role") == "assistant":
            parts.append(TextPart(budget.take("[The prompt gives this as the assistant's message:]")))
        content = message.get("content")
        for item in content if isinstance(content, list) else [content]:
            parts.append(_part(item, budget))
    if len(messages) > MAX_PROMPT_ITEMS:
        parts.append(TextPart(f"[{len(messages) - MAX_PROMPT_ITEMS} more prompt messages left out]"))
    if budget.cut:
        parts.append(TextPart(f"[… {budget.cut} characters of the prompt left out: it is over {MAX_PROMPT_CHARS}]"))
    kept = [p for p in parts if not isinstance(p, TextPart) or p.text]
    return kept or [TextPart(f"(MCP prompt {prompt[:80]!r} is empty)")]


def _part(item: object, budget: _Budget) -> TextPart | ImagePart:
    kind = item.get("type") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(kind, str):
        return TextPart(budget.take("(a prompt content item that is not an object with a type)"))
    if kind == "text":
        return TextPart(budget.take(str_or_none(item.get("text")) or ""))
    if kind == "image":
        data, mime = str_or_none(item.get("data")), str_or_none(item.get("mimeType"))
        if data and mime and is_base64_image(data, mime) and budget.images > 0:
            budget.images -= 1
            return ImagePart(data, mime)
        return TextPart(budget.take(f"[an image ({mime or 'no type'}) the prompt gave, not shown]"))
    if kind == "resource":
        return TextPart(budget.take(_embedded(item.get("resource"))))
    if kind == "resource_link":
        uri = str_or_none(item.get("uri")) or ""
        return TextPart(budget.take(f"[@{str_or_none(item.get('name')) or uri}]({uri})"))
    return TextPart(budget.take(f"[a prompt content item of type {kind[:40]!r}, not shown]"))


def _embedded(resource: object) -> str:
    """An embedded resource as the model reads an editor's (session/live.py `user_message`): text in a
    `<context>` block, a blob described."""
    if not isinstance(resource, dict):
        return "(an embedded resource without contents)"
    uri = (str_or_none(resource.get("uri")) or "")[:2000]
    text = str_or_none(resource.get("text"))
    if text is not None:
        return f'<context uri="{uri}">\n{text}\n</context>'
    blob = str_or_none(resource.get("blob"))
    size = f"{len(blob) * 3 // 4} bytes" if blob is not None else "no data"
    return f"[attached binary resource {uri} ({str_or_none(resource.get('mimeType')) or 'unknown type'}, {size})]"
