"""The runtime zip shipped to executors: importable by a Python that has no dslc, built once into a
private per-user folder, and refused at the driver when it would not import."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dslc.runtime.spark import runtime_zip as rz


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_zip_imports_in_a_python_without_dslc(cache_home, tmp_path):
    path = rz.runtime_zip()
    # -I: no site-packages, no PYTHONPATH from the caller, no current folder: only the zip
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import dslc.runtime.config as c, dslc.runtime.metrics;"
             "print(c.__file__)")
    result = subprocess.run([sys.executable, "-I", "-c", probe, path], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == os.path.join(path, "dslc", "runtime", "config.py")


def test_built_once_into_a_private_folder_and_reused(cache_home):
    first = Path(rz.runtime_zip())
    assert first.name == "dslc_runtime.zip"
    assert cache_home / "dslc" in first.parents
    for folder in (cache_home / "dslc", first.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    built = first.stat().st_mtime_ns
    assert Path(rz.runtime_zip()) == first
    assert first.stat().st_mtime_ns == built
    names = zipfile.ZipFile(first).namelist()
    assert names[:3] == ["dslc/", "dslc/__init__.py", "dslc/runtime/"]
    assert "dslc/runtime/spark/session.py" in names
    assert "jmespath/__init__.py" in names          # ANSWER / PATH on executors that lack it
    assert not [n for n in names if "__pycache__" in n]


def test_a_shared_writable_cache_is_not_used(cache_home, tmp_path, monkeypatch):
    (cache_home / "dslc").mkdir(parents=True)
    os.chmod(cache_home / "dslc", 0o777)
    monkeypatch.setattr(rz.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = Path(rz.runtime_zip())
    assert path.parents[1] == tmp_path / "tmp" / f"dslc-{os.getuid()}"


def test_a_damaged_cached_zip_is_built_again(cache_home):
    path = Path(rz.runtime_zip())
    path.write_bytes(b"not a zip")
    assert Path(rz.runtime_zip()) == path
    rz.check_runtime_zip(str(path))


@pytest.mark.parametrize("entries, message", [
    ({}, "it is empty"),
    ({"dslc/runtime/config.py": ""}, "it lacks dslc/__init__.py, dslc/runtime/__init__.py, dslc/runtime/spark/__init__.py"),
])
def test_an_empty_or_broken_zip_is_an_error_naming_what_is_wrong(tmp_path, entries, message):
    path = tmp_path / "dslc.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in entries.items():
            archive.writestr(name, text)
    with pytest.raises(rz.RuntimeZipError, match="cannot be imported on executors: " + message):
        rz.check_runtime_zip(str(path))


def _zip_of_runtime(path: Path, skip: str = "") -> Path:
    """The runtime as `pip install --target` + `zip -r` would pack it: `dslc` a namespace folder."""
    root = Path(rz.__file__).resolve().parents[1]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("dslc/", "")
        for file in sorted(root.rglob("*.py")):
            name = "dslc/runtime/" + file.relative_to(root).as_posix()
            if "__pycache__" not in name and name != skip:
                archive.write(file, name)
    return path


PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); import dslc.runtime.spark.runtime_zip as rz;"
         "print(rz.runtime_zip())")


def test_a_driver_importing_dslc_from_a_zip_ships_that_zip(tmp_path):
    deps = _zip_of_runtime(tmp_path / "deps.zip")
    result = subprocess.run([sys.executable, "-I", "-c", PROBE, str(deps)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(deps)


def test_a_driver_importing_dslc_from_a_broken_zip_is_told_what_is_missing(tmp_path):
    deps = _zip_of_runtime(tmp_path / "deps.zip", skip="dslc/runtime/spark/__init__.py")
    result = subprocess.run([sys.executable, "-I", "-c", PROBE, str(deps)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60)
    assert result.returncode == 1
    assert (f"runtime zip {deps} cannot be imported on executors: it lacks dslc/runtime/spark/__init__.py"
            in result.stderr)
