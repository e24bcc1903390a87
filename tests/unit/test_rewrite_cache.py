"""tests/support/rewrite_cache.py: the test modules rewritten ahead, in forked processes, are what pytest reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from tests.support import rewrite_cache
from tests.support.rewrite_cache import pyc_of as _pyc

FAILING = "def test_it():\n    left = 1\n    assert left == 2\n"


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_every_test_module_is_rewritten_ahead_and_nothing_else(
    tmp_path: Path, pytestconfig: pytest.Config, cores: int
) -> None:
    if pytestconfig.getoption("assertmode") != "rewrite":
        pytest.skip("the run does not rewrite asserts (--assert=plain)")
    (tmp_path / "pkg").mkdir()
    tests = [tmp_path / f"test_m{i}.py" for i in range(4)] + [tmp_path / "pkg" / "test_deep.py"]
    for path in tests:
        path.write_text(FAILING)
    (tmp_path / "conftest.py").write_text("X = 1\n")
    (tmp_path / "helper.py").write_text("def f():\n    assert False\n")
    (tmp_path / "test_broken.py").write_text("def (:\n")

    rewrite_cache.rewrite_test_modules_ahead(pytestconfig, tmp_path, cores)

    for path in [*tests, tmp_path / "conftest.py"]:
        code = rewrite._read_pyc(path, _pyc(path))
        assert code is not None, path
    assert not _pyc(tmp_path / "helper.py").exists()  # not a test module: pytest imports it plainly
    assert not _pyc(tmp_path / "test_broken.py").exists()  # left to the collection, which reports it

    # What was written is pytest's rewrite: the failing assert explains itself.
    namespace: dict[str, object] = {}
    written = rewrite._read_pyc(tests[0], _pyc(tests[0]))  # the module just written
    assert written is not None
    exec(written, namespace)
    test_it = namespace["test_it"]
    assert callable(test_it)
    with pytest.raises(AssertionError) as failed:
        test_it()
    assert "1 == 2" in str(failed.value)


def test_a_module_changed_after_it_was_written_is_read_as_stale(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    if pytestconfig.getoption("assertmode") != "rewrite":
        pytest.skip("the run does not rewrite asserts (--assert=plain)")
    path = tmp_path / "test_m.py"
    path.write_text(FAILING)
    rewrite_cache.rewrite_test_modules_ahead(pytestconfig, tmp_path, 1)
    path.write_text(FAILING.replace("== 2", "== 3"))
    assert rewrite._read_pyc(path, _pyc(path)) is None  # pytest rewrites it again
