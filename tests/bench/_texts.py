"""Deterministic texts for the context benchmarks (no downloads, same bytes on every run).

- English prose: the Python reference documentation shipped with the interpreter (`pydoc_data.topics`), with
  indented code blocks and reST underlines removed.
- Python code: this repository's own `ama_acp` sources, in sorted order.
- JSON: tool-call-like argument objects and API-like responses, generated from a seeded RNG.
- Chinese: natural sentences about programming written for this benchmark, shuffled with a seeded RNG.
- Mixed Chinese/English: Chinese sentences interleaved with English prose sentences, about half the
  characters each.
"""

from __future__ import annotations

import json
import platform
import random
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def say(line: str = "") -> None:
    """A script's output (ruff bans print, which is meant for the package)."""
    sys.stdout.write(line + "\n")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return (
        f"{time.strftime('%Y-%m-%d')} · {cpu} · {os.cpu_count()} cores · "
        f"Python {sys.version.split()[0]} · {platform.system()}"
    )


def _fit(text: str, size: int) -> str:
    if not text:
        raise ValueError("empty source text")
    reps = size // len(text) + 1
    return (text * reps)[:size]


def english_prose(size: int = 400_000) -> str:
    from pydoc_data.topics import topics

    out: list[str] = []
    for key in sorted(topics):
        for para in topics[key].split("\n\n"):
            lines = para.splitlines()
            if not lines or lines[0].startswith((" ", "\t")):
                continue  # code blocks and grammar productions
            if all(set(ln) <= set("*=-~^\"'") for ln in lines[1:2] if ln):
                continue  # reST titles
            out.append(" ".join(ln.strip() for ln in lines))
    return _fit("\n\n".join(out), size)


def python_code(size: int = 400_000) -> str:
    files = sorted((REPO / "ama_acp").rglob("*.py"))
    return _fit("\n".join(f.read_text(encoding="utf-8") for f in files), size)


_WORDS = (
    "path file line offset limit pattern query command timeout cwd encoding mode name value kind status "
    "result error message content text id index count total size start end range old new replace all"
).split()


def json_text(size: int = 400_000, seed: int = 1) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        obj = {
            "id": f"call_{rng.randrange(16**12):012x}",
            "name": rng.choice(["read", "write", "edit", "shell", "search", "todo"]),
            "arguments": {
                "path": "/".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 5))) + ".py",
                "offset": rng.randint(0, 5000),
                "limit": rng.choice([None, 100, 200, 2000]),
                "flags": [rng.choice(_WORDS) for _ in range(rng.randint(0, 4))],
                "text": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 30))),
                "ratio": round(rng.random(), 4),
                "ok": rng.random() < 0.5,
            },
        }
        s = json.dumps(obj, ensure_ascii=False, indent=rng.choice([None, 2]))
        out.append(s)
        n += len(s) + 1
    return _fit("\n".join(out), size)


_ZH = [
    "请帮我重构这个函数，让它更容易测试。",
    "我们需要在每次工具调用之后更新上下文用量。",
    "这个错误是因为配置文件里缺少了模型的上下文窗口。",
    "先读取文件，然后只修改需要改动的那几行代码。",
    "测试失败了，请查看日志并找出原因。",
    "上下文快满的时候，代理会自动压缩之前的对话。",
    "请不要修改公共接口，保持向后兼容。",
    "把数据库连接的超时时间改成三十秒。",
    "这段代码在处理中文字符的时候速度太慢了。",
    "运行全部单元测试，确认没有回归问题。",
    "用户希望看到每一轮对话花费了多少钱。",
    "这个函数的返回值有时候是空的，需要加上检查。",
]


def chinese(size: int = 200_000, seed: int = 2) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        para = "".join(rng.choice(_ZH) for _ in range(rng.randint(3, 8)))
        out.append(para)
        n += len(para) + 1
    return _fit("\n".join(out), size)


def mixed(size: int = 400_000, seed: int = 3) -> str:
    rng = random.Random(seed)
    english = [s for s in re.split(r"(?<=[.!?])\s+", english_prose(200_000)) if 20 < len(s) < 300]
    out: list[str] = []
    n = zh = 0
    while n < size:
        # Keep the characters about half Chinese, half English.
        if zh <= n - zh:
            s = "".join(rng.choice(_ZH) for _ in range(rng.randint(1, 3)))
            zh += len(s)
        else:
            s = " " + rng.choice(english) + " "
        out.append(s)
        n += len(s)
    return _fit("".join(out), size)
