"""How many examples a property test tries: one hypothesis profile for the whole run, named by the environment
variable HYPOTHESIS_PROFILE (loaded by tests/conftest.py; docs/testing.md has the table).

- `ci`: hypothesis' own CI profile, unchanged: 100 examples where a test names no count, derandomized (every
  CI run tries the same examples, so a failure reproduces), no deadline, no example database. It is what CI
  always ran: hypothesis loads it by itself where the CI variable is set, and .ci/run names it.
- `dev` (the default elsewhere, a person's run): a quarter of the CI counts, random examples, the local
  example database (a failure is tried first next time). Every property still runs on fresh inputs each time.
- `long`: ten times the CI counts, random, for a hunt before a release.

A test that tries the profile's count names none. A test that deliberately tries more or fewer (a slow
property, a cheap one worth many) names its CI count through `examples(n)`, which scales it with the profile:
`examples(300)` is 300 under `ci`, 75 under `dev`, 3,000 under `long`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

ENV = "HYPOTHESIS_PROFILE"
CI_EXAMPLES = 100  # the `ci` profile's count (hypothesis' default): examples(n) is n there
FEWEST = 5  # no property runs on fewer examples than this, whatever the profile
PROFILES = ("ci", "dev", "long")


def load() -> str:
    """Register `dev` and `long`, load the profile HYPOTHESIS_PROFILE names and return its name. Unset, it is
    `ci` where hypothesis detected a CI run (it has loaded its `ci` profile on import) and `dev` elsewhere."""
    relaxed = {
        # A property that takes more than a second on one example has a real problem; hypothesis' 200 ms only
        # measures how busy the machine is when two test workers share two cores. Drawing examples slowly is
        # the same: load, not a property of the code under test.
        "deadline": 1000,
        "suppress_health_check": [HealthCheck.too_slow],
    }
    settings.register_profile("dev", settings.get_profile("default"), max_examples=CI_EXAMPLES // 4, **relaxed)
    settings.register_profile("long", settings.get_profile("default"), max_examples=CI_EXAMPLES * 10, **relaxed)
    name = os.environ.get(ENV) or ("ci" if settings.get_current_profile_name() == "ci" else "dev")
    if name not in PROFILES:
        raise ValueError(f"{ENV}={name!r}: the profiles are {', '.join(PROFILES)}")
    settings.load_profile(name)
    return name


def examples(ci_count: int) -> int:
    """The number of examples for a test that tries `ci_count` under the `ci` profile, scaled to the loaded
    profile (called when the test module is imported, after tests/conftest.py loaded the profile)."""
    loaded = settings.default
    assert loaded is not None, "no hypothesis profile is loaded"
    return max(FEWEST, round(ci_count * loaded.max_examples / CI_EXAMPLES))
