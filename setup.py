"""Which packages the wheel carries, found rather than listed (pyproject.toml holds everything else).

The conformance suite's folder stays `conformance/` at the top of the repository, but it installs as
`ama_conformance`: a top-level package named `conformance` in a person's site-packages could collide with any other
project's (docs/architecture.md "Packaging"). The vendored schema/ folder is mapped in as `ama_conformance._schema`,
so an installed `ama conformance` validates against the same pinned files as a checkout.
"""

from setuptools import find_packages, setup

SUITE, INSTALLED = "conformance", "ama_conformance"


def packages() -> list[str]:
    ours = find_packages(include=["ama_acp", "ama_acp.*"])
    suite = [INSTALLED + name[len(SUITE) :] for name in find_packages(include=[SUITE, SUITE + ".*"])]
    return [*ours, *suite, INSTALLED + "._schema"]


setup(packages=packages(), package_dir={INSTALLED: SUITE, INSTALLED + "._schema": "schema"})
