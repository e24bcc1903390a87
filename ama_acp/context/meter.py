"""The context meter of one session (docs/rules.md U7–U15): how many tokens the next request carries.

It is kept incrementally: each message is estimated once when it is appended (U5) and the meter keeps running
sums, so `append` and `figures` cost the same in a session of ten messages as in one of ten thousand. Only
`replace` (compaction, pruning), `restore` (session load) and `breakdown` (the /context command) walk the
message list.

Sources:

- `prefix`: no request has been made yet; `used` = system prompt + tool declarations + the messages appended so
  far, i.e. what the first request will carry (U10).
- `usage`: an assistant message carried trustworthy usage and nothing edited the context since; `used` = the
  usage of the last such message (the anchor) + estimates of every message after it (U8). A later reply
  without trustworthy usage joins the trailing estimate: it does not discard the anchor.
- `estimate`: after a compaction or edit, any model switch, or a response without trustworthy usage while
  there is no anchor, the whole context is estimated until a response brings usage again (U9, U11).

Independently of the source, the meter remembers whether the latest usage *reading* (a reply that reported
figures) was untrustworthy: while it was, the tier is `unmeasured`, never a tier derived from an estimate
(U11). A reply that reported nothing at all is no reading: it neither sets nor clears that state.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import msgspec

from ama_acp.context.estimate import IMAGE_TOKENS, Estimator, HeuristicEstimator, MessageEstimates, image_count
from ama_acp.context.tiers import DEFAULT_CAPS, UNMEASURED, tier_for
from ama_acp.conversation.messages import AssistantMessage, Message, ToolResultMessage, Usage, UserMessage

log = logging.getLogger(__name__)

PREFIX = "prefix"
USAGE = "usage"
ESTIMATE = "estimate"
SOURCES = (PREFIX, USAGE, ESTIMATE)

DEFAULT_RESERVE = 16384
_ABSURD_FACTOR = 4  # U11: usage above 4x the window cannot be one request's context


class ContextFigures(msgspec.Struct, frozen=True, omit_defaults=True):
    """The meter's reading. None means unknown (U15): leave it out of JSON, never write 0."""

    used: int
    source: str  # prefix | usage | estimate
    tier: str  # healthy | mid | high | warning | danger | unmeasured
    # The two parts of `used` (U8), for every source: the anchor's usage and the estimate after it; for
    # prefix and estimate the usage part is 0 and the trailing part is the whole estimate.
    usage_tokens: int = 0
    trailing_tokens: int = 0
    window: int | None = None
    percent: float | None = None  # one decimal, capped at 100 (U12)
    over_window: bool = False  # used > window: percent is capped, the figure is a lower bound (U11, U12)
    untrusted: bool = False  # the latest usage reading was not trustworthy: tier unmeasured (U11)
    auto_compact_at: int | None = None  # U13
    prune_at: int | None = None  # U14


class ContextBreakdown(msgspec.Struct, frozen=True):
    """Estimated tokens by kind for /context (S3). Images are counted apart from the messages that carry them."""

    system_prompt: int
    tool_declarations: int
    user_messages: int
    assistant_messages: int
    tool_results: int
    images: int
    total: int  # the sum: the estimate of the whole context
    messages: int  # how many messages


class MeterState(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a session stores so that a load shows the figure it had, without re-estimating what usage measured."""

    source: str
    usage_tokens: int | None = None
    trailing_tokens: int | None = None
    message_count: int = 0  # messages in the context when the state was taken
    prefix_key: str | None = None  # digest of the system prompt + tools under which usage_tokens was measured
    untrusted: bool = False  # the latest usage reading was untrustworthy (U11): a load keeps the tier unmeasured


def reported(usage: Usage | None) -> bool:
    """Whether a reply reported usage at all. Figures that are all absent or 0 count nothing: a request always
    carries the system prompt, so that is a provider that did not count (e.g. a stream without a usage event,
    which an Anthropic-style endpoint renders as zeros), not a reading."""
    if usage is None:
        return False
    figures = (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total)
    return any(f is not None and f != 0 for f in figures)


def usage_tokens(usage: Usage | None, window: int | None = None) -> int | None:
    """U7 with the U11 checks: a request's context tokens from its usage, or None when not trustworthy.

    `input` is the uncached input (Anthropic's convention); providers whose input includes cached tokens must
    report `total` or normalise, or cached tokens would count twice.
    """
    if usage is None:
        return None
    for figure in (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total):
        if figure is not None and figure < 0:
            return None
    n = _counted(usage)
    # A request always carries at least the system prompt: 0 means the provider did not count, not "empty".
    if n is None or n <= 0:
        return None
    if window is not None and n > _ABSURD_FACTOR * window:
        return None
    return n


def _counted(usage: Usage) -> int | None:
    """The context tokens the figures add up to: `total` when reported (never below `input`), else the sum of
    its parts, which needs `input` and `output`."""
    if usage.total is not None:
        if usage.input is not None and usage.total < usage.input:
            return None
        return usage.total
    if usage.input is None or usage.output is None:
        return None
    return usage.input + usage.output + (usage.cache_read or 0) + (usage.cache_write or 0)


try:  # hashlib's own BLAKE2, without importing hashlib, whose OpenSSL set-up is ~1.5 ms of every cold start
    from _blake2 import blake2b
except ImportError:  # an interpreter without the builtin module (hashlib then has it from OpenSSL)
    from hashlib import blake2b


def short_digest(*parts: str) -> str:
    """A 96-bit BLAKE2b, in hex, of `parts` (UTF-8, surrogates kept) joined by NUL bytes: the fingerprints the
    meter and the held figure store (a prefix, a server's declarations)."""
    h = blake2b(digest_size=12)
    for n, part in enumerate(parts):
        if n:
            h.update(b"\0")
        h.update(part.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class ContextMeter:
    """One per session. Not thread-safe: call it from the session's task."""

    def __init__(
        self,
        estimator: Estimator | None = None,
        *,
        window: int | None = None,
        reserve_tokens: int = DEFAULT_RESERVE,
        compaction_enabled: bool = True,
        caps: Sequence[float] = DEFAULT_CAPS,
    ) -> None:
        self._estimates = MessageEstimates(estimator or HeuristicEstimator())
        self._system_tokens = 0
        self._tools_tokens = 0
        self._prefix_key: str | None = None  # digest of the current system prompt + tools
        self._anchor_key: str | None = None  # digest in force when the usage anchor was measured
        # A restored anchor not yet compared with a final prefix (a loaded session's MCP servers still starting).
        self._unverified = False
        self._messages: list[Message] = []
        self._messages_total = 0  # sum of the estimates of every message in the context
        self._source = PREFIX
        self._anchor: int | None = None  # usage of the last trustworthy assistant message (source usage)
        self._trailing = 0  # estimates of the messages after the anchor
        self._untrusted = False  # the latest usage reading was untrustworthy (U11)
        self._window = _clean_window(window)
        self._reserve = reserve_tokens
        self._compaction_enabled = compaction_enabled
        self._compaction_held = False
        self._caps = tuple(caps)
        self._cached: ContextFigures | None = None

    # -- inputs ---------------------------------------------------------------------------------------------

    @property
    def estimator(self) -> Estimator:
        return self._estimates.estimator

    @property
    def messages(self) -> Sequence[Message]:
        """The messages the meter counts (read-only view; do not mutate)."""
        return self._messages

    @property
    def source(self) -> str:
        return self._source

    def set_prefix(self, system_prompt: str, tools_json: str, *, final: bool = True) -> None:
        """The system prompt and the tool declarations JSON the next request carries.

        Cheap when nothing changed (one digest). A changed prefix after a measured request is an edit of the
        context (U9): the figure becomes an estimate until the next response.

        `final=False`: the declarations are still arriving (a loaded session's MCP servers are starting), so a
        stored anchor restored with `restore(..., verify_prefix=False)` is not compared with them yet; the first
        final prefix confirms it (same key: nothing moves) or voids it. An anchor measured in this process is
        compared with every prefix, final or not: its key is exact.
        """
        key = short_digest(system_prompt, tools_json)
        if key != self._prefix_key:
            est = self.estimator
            self._system_tokens = est.text(system_prompt)
            self._tools_tokens = est.text(tools_json)
            self._prefix_key = key
            self._cached = None
        if self._source == USAGE and self._anchor_key is not None and self._anchor_key != key:
            if self._unverified and final:
                self._to_estimate()  # a restored anchor whose prefix never came: void (the load's rule)
            elif not self._unverified:
                self._source = ESTIMATE  # U9: an estimate while the prefix differs; the anchor is set aside
            self._cached = None
        elif self._set_aside() and self._anchor_key == key:
            # The prefix the anchor was measured under is back, and nothing edited the messages since: the next
            # request carries exactly what was measured plus what came after it.
            self._source = USAGE
            self._cached = None
        if final:
            self._unverified = False

    @property
    def prefix_key(self) -> str | None:
        """The digest of the prefix last set (None before any)."""
        return self._prefix_key

    @property
    def anchor_unverified(self) -> bool:
        """A restored usage anchor is waiting for a final prefix to be compared with (see `set_prefix`)."""
        return self._unverified and self._source == USAGE

    def append(self, message: Message, measured: bool = True) -> None:
        """A message entered the context. An assistant message's usage (when trustworthy) becomes the anchor;
        one without it joins the trailing estimate (U8), or, with no anchor, the figure is a whole estimate.

        `measured=False`: the reply was served by another model than the current one (the model was switched
        while it streamed). Its usage counts that model's request, with its tokenizer and window: it never
        becomes the anchor of the current model (U9), and the reply joins the estimate like one without usage."""
        n = self._estimates.get(message)
        self._messages.append(message)
        self._messages_total += n
        self._cached = None
        if isinstance(message, AssistantMessage):
            tokens = usage_tokens(message.usage, self._window) if measured else None
            if tokens is not None:
                self._source = USAGE
                self._anchor = tokens
                self._anchor_key = self._prefix_key
                self._unverified = False  # measured now, under the prefix of now
                self._trailing = 0
                self._untrusted = False
                return
            if measured and reported(message.usage):
                log.info("untrustworthy usage %s; the last trustworthy figure stands (U11)", message.usage)
                self._untrusted = True
            if self._source != USAGE and not self._set_aside():
                self._source = ESTIMATE  # a request was made: no longer the prefix, and nothing measured it
                return
        self._trailing += n

    def replace(self, messages: Iterable[Message]) -> None:
        """The context was edited (compaction, pruning): count `messages` instead; the figure is an estimate (U9).

        Messages kept from before keep their cached estimate; only new ones are estimated.
        """
        msgs = list(messages)
        self._estimates.retain(msgs)
        self._messages = msgs
        self._messages_total = sum(self._estimates.get(m) for m in msgs)
        self._to_estimate()
        self._cached = None

    def invalidate(self) -> None:
        """The next request's shape or tokenizer changed (any model switch): estimate until usage (U9)."""
        if self._source != PREFIX:
            self._to_estimate()
            self._cached = None

    def set_window(self, window: int | None) -> None:
        """The current model's context window (None when unknown: no percent, no thresholds, no update)."""
        self._window = _clean_window(window)
        self._cached = None

    @property
    def compaction_held(self) -> bool:
        """Automatic compaction is on hold (a compaction failed, was refused, or left the context too full)."""
        return self._compaction_held

    def set_compaction(self, *, enabled: bool | None = None, held: bool | None = None) -> None:
        """Automatic compaction on/off (config) and held after repeated failures; either hides the thresholds."""
        if enabled is not None:
            self._compaction_enabled = enabled
        if held is not None:
            self._compaction_held = held
        self._cached = None

    # -- outputs --------------------------------------------------------------------------------------------

    @property
    def prefix_tokens(self) -> int:
        """The estimate of the prefix every request carries (system prompt and tool declarations): the boot cost."""
        return self._system_tokens + self._tools_tokens

    def estimate_total(self) -> int:
        """The U9 estimate of the whole context, whatever the current source."""
        return self._system_tokens + self._tools_tokens + self._messages_total

    def thresholds(self) -> tuple[int | None, int | None]:
        """(autoCompactAt, pruneAt) of the current window (U13, U14), whether or not compaction is held — the
        figures leave them out while it is, but the session still needs them to know when to release the hold.
        (None, None) when automatic compaction is off or the window is unknown."""
        window = self._window
        if window is None or not self._compaction_enabled:
            return None, None
        room = window - effective_reserve(window, self._reserve)
        if room <= 0:
            return None, None
        return room, room * 7 // 10  # floor(0.7 × room) in integers: no float rounding at the boundary

    def figures(self) -> ContextFigures:
        """The current reading, O(1)."""
        if self._cached is not None:
            return self._cached
        if self._source == USAGE and self._anchor is not None:
            used = self._anchor + self._trailing
            usage_part, trailing_part = self._anchor, self._trailing
        else:
            used = self.estimate_total()
            usage_part, trailing_part = 0, used
        window = self._window
        percent: float | None = None
        auto_compact_at: int | None = None
        prune_at: int | None = None
        if window is not None:
            percent = min(100.0, round(used * 100 / window, 1))
            if not self._compaction_held:
                auto_compact_at, prune_at = self.thresholds()
        self._cached = ContextFigures(
            used=used,
            source=self._source,
            # U11: an untrustworthy reading leaves no figure to derive a tier from; never healthy by default.
            # The tier is exact (integers from used and window), never derived from the rounded percent.
            tier=UNMEASURED if self._untrusted else tier_for(used, window, self._caps),
            usage_tokens=usage_part,
            trailing_tokens=trailing_part,
            window=window,
            percent=percent,
            auto_compact_at=auto_compact_at,
            prune_at=prune_at,
            over_window=window is not None and used > window,
            untrusted=self._untrusted,
        )
        return self._cached

    def breakdown(self) -> ContextBreakdown:
        """Estimated tokens by kind (S3). O(n) over cached estimates: on demand only."""
        user = assistant = tool = images = 0
        for m in self._messages:
            n = self._estimates.get(m)
            img = image_count(m) * IMAGE_TOKENS
            images += img
            if isinstance(m, UserMessage):
                user += n - img
            elif isinstance(m, ToolResultMessage):
                tool += n - img
            else:
                assistant += n
        total = self._system_tokens + self._tools_tokens + user + assistant + tool + images
        return ContextBreakdown(
            system_prompt=self._system_tokens,
            tool_declarations=self._tools_tokens,
            user_messages=user,
            assistant_messages=assistant,
            tool_results=tool,
            images=images,
            total=total,
            messages=len(self._messages),
        )

    # -- persistence ----------------------------------------------------------------------------------------

    def state(self) -> MeterState:
        """A small struct to store with the session (e.g. beside each assistant message or at turn end)."""
        usage = self._source == USAGE
        return MeterState(
            source=self._source,
            usage_tokens=self._anchor if usage else None,
            trailing_tokens=self._trailing if usage else None,
            message_count=len(self._messages),
            prefix_key=self._anchor_key if usage else None,
            untrusted=self._untrusted,
        )

    def restore(self, messages: Iterable[Message], state: MeterState | None, *, verify_prefix: bool = True) -> None:
        """Session load: count `messages` and take the stored figures instead of re-deriving them.

        Messages stored after the state was taken are appended normally. Without a state the messages are
        replayed (their own usage sets the anchor). A state that does not fit the messages (it counts more
        messages than there are) is not trusted: the figure becomes an estimate.

        The stored anchor is compared with the prefix set so far (a different one: estimate, U9) — unless
        `verify_prefix=False`: the prefix is not final yet (the session's MCP servers have not declared their
        tools), and the anchor stands, unverified, until `set_prefix(..., final=True)`.
        """
        msgs = list(messages)
        self._estimates.retain(msgs)
        self._messages = []
        self._messages_total = 0
        self._source, self._anchor, self._anchor_key, self._trailing = PREFIX, None, None, 0
        self._unverified = False
        self._untrusted = False
        self._cached = None
        fits = state is not None and state.source in SOURCES and 0 <= state.message_count <= len(msgs)
        if state is None or not fits:
            self._replay(msgs, stored=state is not None)
            return
        head, tail = msgs[: state.message_count], msgs[state.message_count :]
        self._untrusted = state.untrusted
        self._messages = head
        self._messages_total = sum(self._estimates.get(m) for m in head)
        if state.source == USAGE and state.usage_tokens is not None:
            self._restore_anchor(state.usage_tokens, state, verify_prefix)
        elif state.source == PREFIX:
            self._source = PREFIX
        else:
            self._source = ESTIMATE
        for m in tail:
            self.append(m)
        self._cached = None

    def _replay(self, msgs: list[Message], *, stored: bool) -> None:
        """Count `msgs` as if they were appended now; a stored state that did not fit them makes it an estimate."""
        for m in msgs:
            self.append(m)
        if stored and self._source != PREFIX:
            log.warning("stored context state does not match the session; estimating")
            self._to_estimate()

    def _restore_anchor(self, anchor: int, state: MeterState, verify_prefix: bool) -> None:
        self._source = USAGE
        self._anchor = anchor
        self._trailing = state.trailing_tokens or 0
        self._anchor_key = state.prefix_key
        if not verify_prefix:
            self._unverified = state.prefix_key is not None  # compared once the prefix is final
        elif self._prefix_key is not None and state.prefix_key is not None and state.prefix_key != self._prefix_key:
            self._to_estimate()  # the prefix changed since the usage was measured (U9)

    # -- internals ------------------------------------------------------------------------------------------

    def _set_aside(self) -> bool:
        """An anchor kept while the prefix differs from the one it was measured under (an estimate meanwhile): a
        prefix that comes back (a tool declared for one mode only, an MCP server that went and came back) makes it
        exact again. Every other way to an estimate drops the anchor."""
        return self._source == ESTIMATE and self._anchor is not None

    def _to_estimate(self) -> None:
        self._source = ESTIMATE
        self._anchor = None
        self._anchor_key = None
        self._unverified = False
        self._trailing = 0


def effective_reserve(window: int, reserve_tokens: int) -> int:
    """The reserve actually kept free under `window` (U13): the configured one, but never more than half the
    window. Without the cap a window of 8,192 or 16,384 tokens under the default 16,384 reserve would have no
    threshold at all and never compact; with it, 32,768 and larger windows keep exactly the configured reserve.
    """
    return max(0, min(reserve_tokens, window // 2))


def _clean_window(window: int | None) -> int | None:
    return window if window is not None and window > 0 else None
