# The C module under `signal`, which the sandbox launcher (ama_acp/tools/sandbox/landlock.py) imports for a fast
# start; typeshed has no stub for it. Only what the launcher uses.
SIGPIPE: int
SIGXFSZ: int
SIG_DFL: int

def signal(signalnum: int, handler: int, /) -> object: ...
