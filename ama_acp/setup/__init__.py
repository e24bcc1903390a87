"""`ama setup`: choose a provider, store its key in the credentials file, pick a default model, write the config.

choices.py  the providers offered, and the checks every typed or passed value goes through
verify.py   the one cheap request that tells whether the key (and the URL) work
toml_out.py writing TOML (the standard library only reads it)
write.py    the config merged into the existing file, and both files written at the very end
prompts.py  the questions, with injectable input/getpass so they run without a terminal
cli.py      argv, the flow, exit codes (docs/configuration.md "Setting up: `ama setup`")
"""
