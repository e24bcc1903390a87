"""ACP v1 wire types that ama reads and writes, as msgspec Structs with the schema's names.

Written by hand from the pinned schema (npm @agentclientprotocol/sdk 2.4.0, schema/v1/schema.unstable.json):
only the types ama uses. Conventions: camelCase on the wire (`rename="camel"`), unknown fields ignored on
input (msgspec's default), optional fields default to None / UNSET and are omitted on output
(`omit_defaults=True`) — an absent figure is unknown, never null or 0.

Every struct repeats `frozen=True`: msgspec inherits the flag from the base at run time, but type checkers
model Structs as dataclasses (PEP 681), where a subclass without the flag reads as non-frozen and may not
inherit from a frozen base. Spelling it out keeps both views the same; the wire shape does not change.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType, field

from ama_acp.wire.subagents import SubagentUpdate, SubagentUsage

Meta = dict[str, Any]


class _In(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of incoming structs: tolerant of unknown fields."""


class _Out(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of outgoing structs: absent optionals are left out."""


# --- content blocks -----------------------------------------------------------------------------------------


class TextContent(_Out, tag="text", tag_field="type", frozen=True):
    text: str
    annotations: dict[str, Any] | None = None
    meta: Meta | None = field(default=None, name="_meta")


class ImageContent(_Out, tag="image", tag_field="type", frozen=True):
    data: str
    mime_type: str
    uri: str | None = None
    annotations: dict[str, Any] | None = None


class AudioContent(_Out, tag="audio", tag_field="type", frozen=True):
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None


class ResourceLink(_Out, tag="resource_link", tag_field="type", frozen=True):
    name: str
    uri: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None


class EmbeddedResource(_Out, tag="resource", tag_field="type", frozen=True):
    resource: dict[str, Any]  # TextResourceContents {uri, text, mimeType?} | BlobResourceContents {uri, blob}
    annotations: dict[str, Any] | None = None


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


# --- initialize ---------------------------------------------------------------------------------------------


class FileSystemCapabilities(_In, frozen=True):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientSessionCapabilities(_In, frozen=True):
    compaction: dict[str, Any] | None = None
    notices: dict[str, Any] | None = None
    config_options: dict[str, Any] | None = None


class AuthCapabilities(_In, frozen=True):
    terminal: bool = False  # the client can run an agent's terminal sign-in method (R42)


class ClientCapabilities(_In, frozen=True):
    fs: FileSystemCapabilities = FileSystemCapabilities()
    terminal: bool = False
    session: ClientSessionCapabilities | None = None
    auth: AuthCapabilities = AuthCapabilities()
    # UNSTABLE `subagents` (SubagentCapabilities, `{}`): the editor shows the task of each `task` call as a session
    # of its own (session/tasks/subagent_view.py). Any: the schema reads a malformed value as "not advertised" (it defaults
    # on error), so it is checked where it is read (session/tasks/subagent_view.py), never a refused initialize.
    subagents: Any = None
    # The older terminal sign-in convention (Zed, the ACP registry's validator): `{"terminal-auth": true}`.
    # Any: a malformed `_meta` is ignored (read with a type check), never a refused initialize.
    meta: Any = field(default=None, name="_meta")


class Implementation(_Out, frozen=True):
    name: str
    version: str
    title: str | None = None


class InitializeRequest(_In, frozen=True):
    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()
    client_info: Implementation | None = None


class PromptCapabilities(_Out, frozen=True):
    image: bool = False
    audio: bool = False
    embedded_context: bool = False


class McpCapabilities(_Out, frozen=True):
    http: bool = False
    sse: bool = False


class SessionCapabilities(_Out, frozen=True):
    list: dict[str, Any] | None = None
    delete: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    close: dict[str, Any] | None = None
    additional_directories: dict[str, Any] | None = None
    fork: dict[str, Any] | None = None  # unstable `session/fork` (session/history/fork.py)


class AgentCapabilities(_Out, frozen=True):
    load_session: bool = False
    prompt_capabilities: PromptCapabilities = PromptCapabilities()
    mcp_capabilities: McpCapabilities = McpCapabilities()
    session_capabilities: SessionCapabilities = SessionCapabilities()


class AuthMethod(_Out, frozen=True):
    """A sign-in method. The `agent` kind (no `type` on the wire): the client calls `authenticate` with its id.
    `type="terminal"`: the client runs the agent's own command with `args` in a terminal. One struct for both,
    as the schema's untagged union has it (an absent `type` means agent)."""

    id: str
    name: str
    description: str | None = None
    type: str | None = None  # None (left out): agent; "terminal"
    args: list[str] | None = None  # terminal only
    meta: Meta | None = field(default=None, name="_meta")  # terminal only: the older `terminal-auth` descriptor


class InitializeResponse(_Out, frozen=True):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[AuthMethod] = []


class AuthenticateRequest(_In, frozen=True):
    method_id: str


# --- sessions -----------------------------------------------------------------------------------------------


class NewSessionRequest(_In, frozen=True):
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] | None = None


class LoadSessionRequest(_In, frozen=True):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] | None = None


class ResumeSessionRequest(_In, frozen=True):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = []
    additional_directories: list[str] | None = None


class ForkSessionRequest(_In, frozen=True):
    """Unstable `session/fork`; its response has session/new's shape (`NewSessionResponse`)."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] | None = None  # the schema: omitted or null is []
    additional_directories: list[str] | None = None


class SessionIdRequest(_In, frozen=True):
    """close, delete, cancel, _ama/session_stats: just the id."""

    session_id: str


class ListSessionsRequest(_In, frozen=True):
    cwd: str | None = None
    cursor: str | None = None


class SessionMode(_Out, frozen=True):
    id: str
    name: str
    description: str | None = None


class SessionModeState(_Out, frozen=True):
    current_mode_id: str
    available_modes: list[SessionMode]


class SessionConfigSelectOption(_Out, frozen=True):
    value: str
    name: str
    description: str | None = None


class SessionConfigOption(_Out, tag="select", tag_field="type", frozen=True):
    """A `select` option (the tag makes `type` always present on the wire)."""

    id: str
    name: str
    current_value: str
    options: list[SessionConfigSelectOption]
    description: str | None = None
    category: str | None = None


class NewSessionResponse(_Out, frozen=True):
    session_id: str
    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None


class LoadSessionResponse(_Out, frozen=True):
    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None


class SessionInfo(_Out, frozen=True):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None
    additional_directories: list[str] | None = None


class ListSessionsResponse(_Out, frozen=True):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SetSessionModeRequest(_In, frozen=True):
    session_id: str
    mode_id: str


class SetSessionConfigOptionRequest(_In, frozen=True):
    session_id: str
    config_id: str
    value: str | bool
    type: str | None = None


class SetSessionConfigOptionResponse(_Out, frozen=True):
    config_options: list[SessionConfigOption]


class Empty(_Out, frozen=True):
    pass


# --- prompt turn --------------------------------------------------------------------------------------------


class PromptRequest(_In, frozen=True):
    session_id: str
    prompt: list[ContentBlock]


# The unstable `Usage` of a PromptResponse: the turn's billed tokens (S1). The schema has one `Usage`, which a
# subagent_update reports too: declared once, in wire/subagents.py.
TurnUsage = SubagentUsage


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class PromptResponse(_Out, frozen=True):
    stop_reason: StopReason
    usage: TurnUsage | None = None


# --- session/update payloads --------------------------------------------------------------------------------


class _Update(_Out, tag_field="sessionUpdate", frozen=True):
    pass


class UserMessageChunk(_Update, tag="user_message_chunk", frozen=True):
    content: ContentBlock
    message_id: str | None = None


class AgentMessageChunk(_Update, tag="agent_message_chunk", frozen=True):
    content: ContentBlock
    message_id: str | None = None


class AgentThoughtChunk(_Update, tag="agent_thought_chunk", frozen=True):
    content: ContentBlock
    message_id: str | None = None


class ToolCallLocation(_Out, frozen=True):
    path: str
    line: int | None = None


class Diff(_Out, tag="diff", tag_field="type", frozen=True):
    path: str
    old_text: str | None  # required here so a new file is sent as `oldText: null`
    new_text: str


class Content(_Out, tag="content", tag_field="type", frozen=True):
    content: ContentBlock


class TerminalRef(_Out, tag="terminal", tag_field="type", frozen=True):
    terminal_id: str


ToolCallContent = Content | Diff | TerminalRef

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]


class ToolCall(_Update, tag="tool_call", frozen=True):
    tool_call_id: str
    title: str
    kind: str = "other"
    status: ToolCallStatus = "pending"
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None


class ToolCallUpdate(_Update, tag="tool_call_update", frozen=True):
    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    kind: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    meta: Meta | None = field(default=None, name="_meta")  # on a task call: the task's figures (`ama.task`)


PlanPriority = Literal["high", "medium", "low"]
PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanEntry(_Out, frozen=True):
    content: str
    priority: PlanPriority
    status: PlanStatus


class Plan(_Update, tag="plan", frozen=True):
    entries: list[PlanEntry]


class AvailableCommandInput(_Out, frozen=True):
    hint: str


class AvailableCommand(_Out, frozen=True):
    name: str
    description: str
    input: AvailableCommandInput | None = None


class AvailableCommandsUpdate(_Update, tag="available_commands_update", frozen=True):
    available_commands: list[AvailableCommand]


class CurrentModeUpdate(_Update, tag="current_mode_update", frozen=True):
    current_mode_id: str


class ConfigOptionUpdate(_Update, tag="config_option_update", frozen=True):
    config_options: list[SessionConfigOption]


class SessionInfoUpdate(_Update, tag="session_info_update", frozen=True):
    # UNSET (not None): `title: null` would clear the client's title (R129).
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET


class Cost(_Out, frozen=True):
    amount: float
    currency: str  # required on the wire: no default, so it is never omitted


class UsageUpdate(_Update, tag="usage_update", frozen=True):
    used: int
    size: int
    # UNSET: left out (the sender says nothing about the cost); None: null, the cost is unknown (docs/rules.md P1).
    cost: Cost | None | UnsetType = UNSET
    meta: Meta | None = field(default=None, name="_meta")


class Notice(_Update, tag="notice", frozen=True):
    severity: Literal["info", "warning", "error"]
    title: str
    description: str | None = None
    meta: Meta | None = field(default=None, name="_meta")


class CompactionUpdate(_Update, tag="compaction_update", frozen=True):
    compaction_id: str
    status: Literal["in_progress", "completed", "failed"]
    summary: list[ContentBlock] | None = None
    error: str | None = None


SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
    | Notice
    | CompactionUpdate
    | SubagentUpdate
)


class SessionNotification(_Out, frozen=True):
    session_id: str
    update: SessionUpdate


# --- agent → client requests --------------------------------------------------------------------------------


class PermissionOption(_Out, frozen=True):
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class ToolCallFields(_Out, frozen=True):
    """A ToolCallUpdate outside a session/update (in a permission request): no `sessionUpdate` tag."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    kind: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None


class RequestPermissionRequest(_Out, frozen=True):
    session_id: str
    tool_call: ToolCallFields
    options: list[PermissionOption]


class SelectedPermissionOutcome(_In, tag="selected", tag_field="outcome", frozen=True):
    option_id: str


class CancelledPermissionOutcome(_In, tag="cancelled", tag_field="outcome", frozen=True):
    pass


class RequestPermissionResponse(_In, frozen=True):
    """The client's answer to session/request_permission, decoded before ama acts on it."""

    outcome: SelectedPermissionOutcome | CancelledPermissionOutcome


class ReadTextFileRequest(_Out, frozen=True):
    session_id: str
    path: str
    line: int | None = None
    limit: int | None = None


class WriteTextFileRequest(_Out, frozen=True):
    session_id: str
    path: str
    content: str


class EnvVariable(_Out, frozen=True):
    name: str
    value: str


class CreateTerminalRequest(_Out, frozen=True):
    session_id: str
    command: str
    args: list[str] = []
    env: list[EnvVariable] = []
    cwd: str | None = None
    output_byte_limit: int | None = None


class TerminalRequest(_Out, frozen=True):
    """terminal/output, terminal/wait_for_exit, terminal/kill, terminal/release: which terminal."""

    session_id: str
    terminal_id: str


# --- the client's answers to those requests -----------------------------------------------------------------
# Decoded by wire/answers.py, which also holds the schema's leniencies that a Struct cannot say (a null answer
# where every field is optional; an exit status of the wrong type read as absent).


class ReadTextFileResponse(_In, frozen=True):
    content: str


class WriteTextFileResponse(_In, frozen=True):
    pass


class CreateTerminalResponse(_In, frozen=True):
    # The schema allows any string; an empty one is refused, as it always was: no terminal can be named by it.
    terminal_id: Annotated[str, msgspec.Meta(min_length=1)]


class TerminalExitStatus(_In, frozen=True):
    """How a command ended: an exit code, or the signal that killed it (both absent while it runs)."""

    exit_code: int | None = None
    signal: str | int | None = None  # the schema's name ("SIGKILL"); a number some clients send is kept


class TerminalOutputResponse(_In, frozen=True):
    output: str
    truncated: bool
    exit_status: TerminalExitStatus | None = None


# terminal/wait_for_exit answers the exit status itself (the schema's WaitForTerminalExitResponse has its fields).
WaitForTerminalExitResponse = TerminalExitStatus


class KillTerminalResponse(_In, frozen=True):
    pass


class ReleaseTerminalResponse(_In, frozen=True):
    pass
