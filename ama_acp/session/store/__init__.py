"""The durable store: session files (read, written, listed, locked), the files kept beside them (checkpoints, task journals), `ama sessions`."""
