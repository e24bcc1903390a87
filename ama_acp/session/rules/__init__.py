"""Permission rules that stick (docs/tools.md "Permission rules"): `TOOL(PATTERN)` strings from the person's config
that allow, ask or deny calls whatever the mode says."""
