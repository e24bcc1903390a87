"""The test groups: what a group is (`base.py`), each group a module, and `catalog.py`, which imports them all
in run order and so registers every one in `GROUPS`. This `__init__` imports nothing, so importing one group or
`base` never imports the others (nor, through them, whatever imports the catalog)."""
