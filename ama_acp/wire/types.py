"""ACP v1 wire types that ama reads and writes, as msgspec Structs with the schema's names.

Written by hand from the pinned schema (npm @agentclientprotocol/sdk 2.4.0, schema/v1/schema.unstable.json):
only the types ama uses. Conventions: camelCase on the wire (`rename="camel"`), unknown fields ignored on
input (msgspec's default), optional fields default to None / UNSET and are omitted on output
(`omit_defaults=True`) — an absent figure is unknown, never null or 0.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType, field

Meta = dict[str, Any]


class _In(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of incoming structs: tolerant of unknown fields."""


class _Out(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """Base of outgoing structs: absent optionals are left out."""


# --- content blocks -----------------------------------------------------------------------------------------


class TextContent(_Out, tag="text", tag_field="type"):
    text: str
    annotations: dict | None = None
    meta: Meta | None = field(default=None, name="_meta")


class ImageContent(_Out, tag="image", tag_field="type"):
    data: str
    mime_type: str
    uri: str | None = None
    annotations: dict | None = None


class AudioContent(_Out, tag="audio", tag_field="type"):
    data: str
    mime_type: str
    annotations: dict | None = None


class ResourceLink(_Out, tag="resource_link", tag_field="type"):
    name: str
    uri: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict | None = None


class EmbeddedResource(_Out, tag="resource", tag_field="type"):
    resource: dict[str, Any]  # TextResourceContents {uri, text, mimeType?} | BlobResourceContents {uri, blob}
    annotations: dict | None = None


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


# --- initialize ---------------------------------------------------------------------------------------------


class FileSystemCapabilities(_In):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientSessionCapabilities(_In):
    compaction: dict | None = None
    notices: dict | None = None
    config_options: dict | None = None


class ClientCapabilities(_In):
    fs: FileSystemCapabilities = FileSystemCapabilities()
    terminal: bool = False
    session: ClientSessionCapabilities | None = None


class Implementation(_Out):
    name: str
    version: str
    title: str | None = None


class InitializeRequest(_In):
    protocol_version: int
    client_capabilities: ClientCapabilities = ClientCapabilities()
    client_info: Implementation | None = None


class PromptCapabilities(_Out):
    image: bool = False
    audio: bool = False
    embedded_context: bool = False


class McpCapabilities(_Out):
    http: bool = False
    sse: bool = False


class SessionCapabilities(_Out):
    list: dict | None = None
    delete: dict | None = None
    resume: dict | None = None
    close: dict | None = None
    additional_directories: dict | None = None


class AgentCapabilities(_Out):
    load_session: bool = False
    prompt_capabilities: PromptCapabilities = PromptCapabilities()
    mcp_capabilities: McpCapabilities = McpCapabilities()
    session_capabilities: SessionCapabilities = SessionCapabilities()


class AuthMethod(_Out):
    id: str
    name: str
    description: str | None = None


class InitializeResponse(_Out):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[AuthMethod] = []


class AuthenticateRequest(_In):
    method_id: str


# --- sessions -----------------------------------------------------------------------------------------------


class NewSessionRequest(_In):
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] | None = None


class LoadSessionRequest(_In):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] | None = None


class ResumeSessionRequest(_In):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = []
    additional_directories: list[str] | None = None


class SessionIdRequest(_In):
    """close, delete, cancel, _ama/session_stats: just the id."""

    session_id: str


class ListSessionsRequest(_In):
    cwd: str | None = None
    cursor: str | None = None


class SessionMode(_Out):
    id: str
    name: str
    description: str | None = None


class SessionModeState(_Out):
    current_mode_id: str
    available_modes: list[SessionMode]


class SessionConfigSelectOption(_Out):
    value: str
    name: str
    description: str | None = None


class SessionConfigOption(_Out, tag="select", tag_field="type"):
    """A `select` option (the tag makes `type` always present on the wire)."""

    id: str
    name: str
    current_value: str
    options: list[SessionConfigSelectOption]
    description: str | None = None
    category: str | None = None


class NewSessionResponse(_Out):
    session_id: str
    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None


class LoadSessionResponse(_Out):
    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None


class SessionInfo(_Out):
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None
    additional_directories: list[str] | None = None


class ListSessionsResponse(_Out):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SetSessionModeRequest(_In):
    session_id: str
    mode_id: str


class SetSessionConfigOptionRequest(_In):
    session_id: str
    config_id: str
    value: str | bool
    type: str | None = None


class SetSessionConfigOptionResponse(_Out):
    config_options: list[SessionConfigOption]


class Empty(_Out):
    pass


# --- prompt turn --------------------------------------------------------------------------------------------


class PromptRequest(_In):
    session_id: str
    prompt: list[ContentBlock]


class TurnUsage(_Out):
    """The unstable `Usage` of a PromptResponse: the turn's billed tokens (S1)."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class PromptResponse(_Out):
    stop_reason: StopReason
    usage: TurnUsage | None = None


# --- session/update payloads --------------------------------------------------------------------------------


class _Update(_Out, tag_field="sessionUpdate"):
    pass


class UserMessageChunk(_Update, tag="user_message_chunk"):
    content: ContentBlock
    message_id: str | None = None


class AgentMessageChunk(_Update, tag="agent_message_chunk"):
    content: ContentBlock
    message_id: str | None = None


class AgentThoughtChunk(_Update, tag="agent_thought_chunk"):
    content: ContentBlock
    message_id: str | None = None


class ToolCallLocation(_Out):
    path: str
    line: int | None = None


class Diff(_Out, tag="diff", tag_field="type"):
    path: str
    old_text: str | None  # required here so a new file is sent as `oldText: null`
    new_text: str


class Content(_Out, tag="content", tag_field="type"):
    content: ContentBlock


class TerminalRef(_Out, tag="terminal", tag_field="type"):
    terminal_id: str


ToolCallContent = Content | Diff | TerminalRef

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]


class ToolCall(_Update, tag="tool_call"):
    tool_call_id: str
    title: str
    kind: str = "other"
    status: ToolCallStatus = "pending"
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None


class ToolCallUpdate(_Update, tag="tool_call_update"):
    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    kind: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None


class PlanEntry(_Out):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


class Plan(_Update, tag="plan"):
    entries: list[PlanEntry]


class AvailableCommandInput(_Out):
    hint: str


class AvailableCommand(_Out):
    name: str
    description: str
    input: AvailableCommandInput | None = None


class AvailableCommandsUpdate(_Update, tag="available_commands_update"):
    available_commands: list[AvailableCommand]


class CurrentModeUpdate(_Update, tag="current_mode_update"):
    current_mode_id: str


class ConfigOptionUpdate(_Update, tag="config_option_update"):
    config_options: list[SessionConfigOption]


class SessionInfoUpdate(_Update, tag="session_info_update"):
    # UNSET (not None): `title: null` would clear the client's title (R129).
    title: str | UnsetType = UNSET
    updated_at: str | UnsetType = UNSET


class Cost(_Out):
    amount: float
    currency: str  # required on the wire: no default, so it is never omitted


class UsageUpdate(_Update, tag="usage_update"):
    used: int
    size: int
    cost: Cost | None = None
    meta: Meta | None = field(default=None, name="_meta")


class Notice(_Update, tag="notice"):
    severity: Literal["info", "warning", "error"]
    title: str
    description: str | None = None


class CompactionUpdate(_Update, tag="compaction_update"):
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
)


class SessionNotification(_Out):
    session_id: str
    update: SessionUpdate


# --- agent → client requests --------------------------------------------------------------------------------


class PermissionOption(_Out):
    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class ToolCallFields(_Out):
    """A ToolCallUpdate outside a session/update (in a permission request): no `sessionUpdate` tag."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    title: str | None = None
    kind: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None


class RequestPermissionRequest(_Out):
    session_id: str
    tool_call: ToolCallFields
    options: list[PermissionOption]


class SelectedPermissionOutcome(_In, tag="selected", tag_field="outcome"):
    option_id: str


class CancelledPermissionOutcome(_In, tag="cancelled", tag_field="outcome"):
    pass


class RequestPermissionResponse(_In):
    """The client's answer to session/request_permission, decoded before ama acts on it."""

    outcome: SelectedPermissionOutcome | CancelledPermissionOutcome


class ReadTextFileRequest(_Out):
    session_id: str
    path: str
    line: int | None = None
    limit: int | None = None


class WriteTextFileRequest(_Out):
    session_id: str
    path: str
    content: str


class EnvVariable(_Out):
    name: str
    value: str


class CreateTerminalRequest(_Out):
    session_id: str
    command: str
    args: list[str] = []
    env: list[EnvVariable] = []
    cwd: str | None = None
    output_byte_limit: int | None = None


class TerminalRequest(_Out):
    session_id: str
    terminal_id: str
