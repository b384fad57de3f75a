"""The cached Debian roots' plumbing (tools/roots.py), without building one."""

import dataclasses

import pytest

from tools import roots

pytestmark = pytest.mark.unit


def test_the_archive_comes_from_the_machines_apt_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "a.sources").write_text(
        "Types: deb\n# a comment\nURIs: http://mirror.invalid/debian-security\nSuites: x-security\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian/\nSuites: x\n"
    )
    assert roots.archive_uri([str(tmp_path / "sources.list.d")]) == "http://mirror.invalid/debian"
    one_line = tmp_path / "sources.list"
    one_line.write_text("deb [arch=amd64 signed-by=/k.gpg] http://other.invalid/debian x main\n")
    assert roots.archive_uri([str(one_line)]) == "http://other.invalid/debian"


def test_no_debian_archive_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://ports.invalid/ubuntu x main\n")
    with pytest.raises(roots.RootError, match="no Debian archive in this machine's apt sources"):
        roots.archive_uri([str(tmp_path / "sources.list")])


def test_a_changed_recipe_gets_a_new_folder_and_an_unchanged_one_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_ROOTS_DIR", str(tmp_path))
    recipe = roots.recipes()["sid"]
    assert roots.recipes()["sid"].digest() == recipe.digest()
    changed = dataclasses.replace(recipe, packages=(*recipe.packages, "hello"))
    assert roots.root_path(changed) != roots.root_path(recipe)
    assert roots.root_path(recipe).parent == tmp_path
    # Not built: nothing cached; a ready marker makes it the cached root.
    assert roots.cached("sid") is None
    roots.root_path(recipe).mkdir()
    (roots.root_path(recipe) / roots.READY).write_text("{}")
    assert roots.cached("sid") == roots.root_path(recipe)


def test_the_project_dependencies_are_part_of_the_recipe():
    deps = roots.project_dependencies()
    assert any(d.startswith("openai") for d in deps)
    assert set(deps) <= set(roots.recipes()["sid"].pip) and "bpy==5.2.3" in roots.recipes()["trixie"].pip


def test_enter_binds_the_root_proc_dev_sys_and_folders_in_a_private_mount_namespace(tmp_path):
    (tmp_path / "root" / "etc").mkdir(parents=True)
    (tmp_path / "root" / "etc" / "debian_version").write_text("forky/sid\n")
    argv = roots.enter_argv(tmp_path / "root", ["blender", "-b"], binds=[tmp_path], cwd="/work", env={"A": "1"})
    assert argv[:4] == ["unshare", "-m", "--propagation", "private"]
    script = argv[6]
    assert 'mount --rbind "$root" "$root"' in script and "for d in proc dev sys" in script
    rest = argv[8:]
    # The sandbox's uid lock folder is always shared with the root (uid leases are machine-wide).
    assert rest[:5] == [str(tmp_path / "root"), "/work", "2", *sorted([str(tmp_path), str(roots.UID_LOCK_DIR)])]
    assert rest[5:7] == ["env", "-i"] and "A=1" in rest and rest[-2:] == ["blender", "-b"]
    with pytest.raises(roots.RootError, match="not a folder"):
        roots.enter_argv(tmp_path / "root", ["true"], binds=[tmp_path / "missing"])
    # Anything else is refused before a mount is made: an empty path, a plain folder.
    for wrong in ("", tmp_path):
        with pytest.raises(roots.RootError, match="is not a Debian root"):
            roots.enter_argv(wrong, ["true"])


def test_pip_setup_carries_the_config_files_and_the_local_indexes_they_name(tmp_path):
    index = tmp_path / "pypi" / "simple"
    index.mkdir(parents=True)
    links = tmp_path / "wheels"
    links.mkdir()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch<=2\n")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nextra-index-url = file://{index}\nconstraint = {constraints}\ncert = /ca.crt\n")
    files, folders = roots.pip_setup({"PIP_FIND_LINKS": str(links), "PIP_CERT": "/ca.crt"}, configs=[str(conf)])
    assert files == sorted([str(conf), str(constraints)])
    # The index's parent: its pages link to ../../files.
    assert folders == sorted([str(tmp_path / "pypi"), str(links)])
    env = roots.pip_environment()
    assert env["PIP_CERT"] == roots.ROOT_CA and env["SSL_CERT_FILE"] == roots.ROOT_CA


def test_removing_a_root_refuses_while_anything_is_mounted_inside(tmp_path, monkeypatch):
    folder = tmp_path / "sid-x.partial"
    (folder / "proc").mkdir(parents=True)
    monkeypatch.setattr(roots, "_mounts_under", lambda path: [str(folder / "proc")])
    with pytest.raises(roots.RootError, match="live mounts"):
        roots.remove_root_dir(folder)
    assert folder.is_dir()
    monkeypatch.undo()
    roots.remove_root_dir(folder)
    assert not folder.exists()


def test_unknown_root_names_the_choices():
    with pytest.raises(roots.RootError, match="choose one of sid, trixie"):
        roots.build("stretch")


def test_prune_removes_only_the_roots_of_older_recipes(tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_ROOTS_DIR", str(tmp_path))
    current = roots.root_path(roots.recipes()["sid"])
    old = tmp_path / "sid-0123456789ab"
    failed = tmp_path / "trixie-aaaaaaaaaaaa.partial"
    # The other tier's root being built right now (./bvb test-blender 5.2 and 5.2-bin at once).
    building = roots.root_path(roots.recipes()["trixie"]).with_name(
        roots.root_path(roots.recipes()["trixie"]).name + ".partial"
    )
    other = tmp_path / "not-a-root"
    for folder in (current, old, failed, building, other):
        (folder / "etc").mkdir(parents=True)
    assert roots.prune() == sorted([old, failed])
    assert current.is_dir() and other.is_dir() and not old.exists() and not failed.exists()
    assert building.is_dir()
