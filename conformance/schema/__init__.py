"""The pinned ACP schema's checks: where the files live, a fast validity check in front of jsonschema, per-method tables."""
