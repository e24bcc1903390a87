"""The built-in tools as the model sees them (name, description, JSON schema of the arguments), with where each
is defined: what a session's requests declare before any tool runs, without importing every tool's module (~15 ms
of a fresh ama's first answer, issue 41). Generated from the tools themselves, and checked equal to them, by
tests/unit/test_tool_declarations.py; `task` is left out (its declaration lists the configured agents: task.py
builds it).
"""

from __future__ import annotations

from ama_acp.tools.base import JSONObject

# name → (module, class, description, parameters), in the order the model sees the tools (registry.default_tools).
DECLARED: dict[str, tuple[str, str, str, JSONObject]] = {
    "read_file": (
        "ama_acp.tools.read",
        "ReadTool",
        "Read a text file from the workspace. Returns its lines numbered from 1 ('     7\\tcode'); the numbers are not part of the file. Reads up to 2000 lines from `offset`; for longer files the result says how to continue. Use it before editing a file, and prefer reading the relevant part of a large file (find it with `search`) over reading everything. Directories: use list_dir.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, absolute or relative to the working directory."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read. Default 2000."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    "write_file": (
        "ama_acp.tools.write",
        "WriteTool",
        "Write a file: create it, or replace everything in it. Missing parent directories are created. For changes to an existing file prefer edit_file, which sends only the changed parts; read a file before overwriting it. `content` is written exactly as given (no line numbers).",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, absolute or relative to the working directory."},
                "content": {"type": "string", "description": "The complete new content of the file."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    ),
    "edit_file": (
        "ama_acp.tools.edit",
        "EditTool",
        "Edit an existing file by exact string replacement. Each edit replaces `old_text` with `new_text`; `old_text` must match the file exactly (whitespace and indentation included, without read_file's line numbers) and occur exactly once, unless `replace_all` is true. Include enough surrounding lines to make it unique. Several edits in one call are applied in order, each to the result of the previous one, and the file changes only if all of them apply. Read the file first. To create a file use write_file.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, absolute or relative to the working directory."},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements, applied in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_text": {"type": "string", "description": "Exact text to replace."},
                            "new_text": {"type": "string", "description": "The replacement."},
                            "replace_all": {
                                "type": "boolean",
                                "description": "Replace every occurrence instead of requiring exactly one.",
                                "default": False,
                            },
                        },
                        "required": ["old_text", "new_text"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["path", "edits"],
            "additionalProperties": False,
        },
    ),
    "list_dir": (
        "ama_acp.tools.ls",
        "ListTool",
        "List the entries of one directory (not recursive): subdirectories first, marked with a trailing '/', then files with their sizes. To find files by name across the tree use find_files.",
        {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory, absolute or relative to the working directory. Default: the working directory.",
                }
            },
            "required": [],
            "additionalProperties": False,
        },
    ),
    "find_files": (
        "ama_acp.tools.search.glob",
        "GlobTool",
        "Find files whose path matches a glob pattern, such as `**/*.py`, `src/**/test_*.ts` or `*.{json,toml}`. `*` matches within one directory level and `**` across levels, so `*.md` matches only files directly in `path` and `**/*.md` matches at any depth. Files ignored by .gitignore are left out. Results are sorted by modification time, newest first. To search file contents use search.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob, relative to `path`."},
                "path": {"type": "string", "description": "Directory to search in. Default: the working directory."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    ),
    "search": (
        "ama_acp.tools.search.grep",
        "GrepTool",
        "Search file contents with a regular expression (ripgrep syntax) and get `path:line:text` for each matching line. Searches the working directory or `path` (a directory or one file), skipping files ignored by .gitignore and binary files. Narrow it with `glob` (for example `*.py` or `src/**/*.ts`), and ask for surrounding lines with `context`. Use it to locate code before reading it; to find files by name use find_files.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to look for."},
                "path": {
                    "type": "string",
                    "description": "Directory or file to search. Default: the working directory.",
                },
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.py`."},
                "ignore_case": {"type": "boolean", "description": "Match case-insensitively.", "default": False},
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 20,
                    "description": "Lines of context to show before and after each match. Default 0.",
                    "default": 0,
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    ),
    "run_command": (
        "ama_acp.tools.shell",
        "ShellTool",
        "Run a shell command in the working directory and get its combined stdout and stderr and its exit code. Write POSIX sh: it runs under bash, or /bin/sh when the editor's terminal runs it. Use it for builds, tests, git and other programs. Nothing is interactive: stdin is empty and pagers are off. Each call starts a fresh shell, so `cd` and exported variables do not carry over; chain them with `&&`. The command is killed after `timeout` seconds (default 120, at most 600), with everything it started. Output above about 30 KB keeps its beginning and end. To read, find or search files prefer read_file, find_files and search. Commands may run in ama's sandbox, which blocks some writes and network access; the result of a blocked command says so.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line."},
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 600,
                    "description": "Seconds before the command is killed. Default 120.",
                    "default": 120,
                },
                "description": {
                    "type": "string",
                    "description": "What the command does, in a few words, for the person watching.",
                },
                "outside_sandbox": {
                    "type": "boolean",
                    "description": "Run this command once outside ama's sandbox, with the person's full rights. Only after the sandbox blocked this command (its result says so) and the task needs what was blocked. The person is always asked and may decline. Default false.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
    "todo_write": (
        "ama_acp.tools.todo",
        "TodoTool",
        "Keep a task list for work with several steps; the person sees it as your plan. Each call replaces the whole list, so send every item each time with its current status. Mark an item `in_progress` when you start it (one at a time) and `completed` as soon as it is done. Skip it for simple one-step requests.",
        {
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete list, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "The task, in a short imperative sentence."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "priority": {"type": "string", "enum": ["high", "medium", "low"], "default": "medium"},
                        },
                        "required": ["content", "status"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["todos"],
            "additionalProperties": False,
        },
    ),
    "web_fetch": (
        "ama_acp.tools.web.fetch",
        "WebFetchTool",
        "Fetch a web page (http or https URL) and get it as Markdown: scripts, styles and navigation are dropped, links made absolute. Text and JSON come back as they are; images, PDFs and other binary types are refused. Redirects are followed. The result starts with the final URL and the page title. Use it for documentation, issues or pages the person points you at; the person may be asked first. Local and private network addresses are refused unless the person allowed them.",
        {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The full URL, with http:// or https://."},
                "max_chars": {
                    "type": "integer",
                    "minimum": 1000,
                    "maximum": 200000,
                    "default": 50000,
                    "description": "At most this many characters of the page are returned (default 50,000).",
                },
                "raw": {
                    "type": "boolean",
                    "description": "Return an HTML page's source instead of Markdown (default false).",
                },
            },
            "required": ["url"],
            "additionalProperties": False,
        },
    ),
}
