"""The core of a run: the agent under test as a process, the run's config, findings and verdicts, the transcript checks, the report."""
