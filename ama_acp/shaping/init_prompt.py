"""`/init` (docs/commands.md "/init"): the built-in command whose prompt has the model study the project and write
or improve its AGENTS.md. It is a prompt like a command file's, sent as the person's message: the model works
with its tools, and a write asks for permission as any write does (in `read_only` and `plan` the mode refuses it,
and the model can only propose the file)."""

from __future__ import annotations

from ama_acp.shaping.commands import FileCommand

INIT_BODY = """\
Study this project and write its AGENTS.md at the working directory: the instructions a coding agent (you, \
another agent, a new colleague) needs to work here well from the first minute. If AGENTS.md (or CLAUDE.md) \
already exists, improve it instead of replacing it: keep what is still true and what the team wrote on purpose, \
correct what the code contradicts, and add what is missing.

First look, do not guess: read the README, the build and package files (pyproject.toml, package.json, Cargo.toml, \
go.mod, Makefile, justfile, CI workflows), the folders' layout, a few central modules and tests, and any existing \
instruction files (AGENTS.md, CLAUDE.md, .cursorrules, .github/copilot-instructions.md, CONTRIBUTING.md).

A good AGENTS.md is short (well under 200 lines), specific to this project, and holds:
- how to install, build, lint, type-check and test, as exact commands, including how to run one test;
- the layout: what each top-level folder holds and where the entry points are;
- the conventions the code follows that a newcomer would get wrong (style, naming, error handling, imports, \
how tests are written, what must not be edited by hand);
- anything surprising: required environment, generated files, slow or flaky tests, commit and review rules.
Leave out what any developer knows and what a quick look at a file tells; never invent a command you did not \
find evidence for.

When you are done, write the file with your tools (the person approves the write) and say in a few lines what \
you wrote or changed and why."""

INIT = FileCommand(
    name="init",
    description="Study the project and write or improve its AGENTS.md",
    hint="optional focus",
    body=INIT_BODY,
    source="built-in",
    shown="built-in",
    format="ama",
)
