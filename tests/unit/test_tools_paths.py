import os

from ama_acp.tools.paths import PathPolicy


def test_relative_path_inside(tmp_path):
    policy = PathPolicy([str(tmp_path)])
    r = policy.resolve("src/app.py", str(tmp_path))
    assert r.inside
    assert r.abs_path == os.path.join(os.path.realpath(tmp_path), "src", "app.py")
    assert r.path == os.path.join(str(tmp_path), "src", "app.py")


def test_root_itself_is_inside(tmp_path):
    assert PathPolicy([str(tmp_path)]).resolve(".", str(tmp_path)).inside


def test_dotdot_escape_is_outside(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    policy = PathPolicy([str(root)])
    assert not policy.resolve("../secret.txt", str(root)).inside
    assert not policy.resolve("sub/../../x", str(root)).inside
    assert not policy.resolve("/etc/passwd", str(root)).inside


def test_sibling_with_common_prefix_is_outside(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj2").mkdir()
    policy = PathPolicy([str(tmp_path / "proj")])
    assert not policy.resolve(str(tmp_path / "proj2" / "a"), str(tmp_path / "proj")).inside


def test_symlink_pointing_outside_is_outside(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("x")
    (root / "link").symlink_to(outside)
    (root / "dangling").symlink_to(outside / "not-yet")
    policy = PathPolicy([str(root)])
    assert not policy.resolve("link/f.txt", str(root)).inside
    assert not policy.resolve("link/new-file.txt", str(root)).inside
    assert not policy.resolve("dangling", str(root)).inside


def test_symlink_inside_is_inside(tmp_path):
    root = tmp_path / "proj"
    (root / "real").mkdir(parents=True)
    (root / "alias").symlink_to(root / "real")
    r = PathPolicy([str(root)]).resolve("alias/x.py", str(root))
    assert r.inside
    assert r.abs_path == os.path.join(os.path.realpath(root), "real", "x.py")


def test_new_file_in_new_subdir_is_inside(tmp_path):
    assert PathPolicy([str(tmp_path)]).resolve("a/b/c/new.txt", str(tmp_path)).inside


def test_root_given_through_a_symlink(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    policy = PathPolicy([str(tmp_path / "via")])
    assert policy.resolve(str(real / "x"), str(real)).inside


def test_additional_roots(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    policy = PathPolicy([str(tmp_path / "a")])
    assert not policy.resolve("../b/x", str(tmp_path / "a")).inside
    policy = PathPolicy([str(tmp_path / "a"), str(tmp_path / "b")])
    assert policy.resolve("../b/x", str(tmp_path / "a")).inside
