"""An importable zip of `dslc.runtime` for executors on which dslc is not installed.

Executors only need pyspark, pyarrow and aiohttp: the job ships this zip with `addPyFile` (or
`addArtifacts` on Spark Connect) and Python's zip importer finds `dslc.runtime` in it. The zip is
built once per dslc version and runtime content into a private per-user cache folder and reused;
a zip that would not import (no package entries, no files) is an error at the driver.

Pure-Python packages the runtime uses on executors (`VENDORED`: `jmespath` for ANSWER and PATH,
the `redis` client of an answer store on Redis) go into the zip too, from the driver's
installation, so executors need nothing installed for them either.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import stat
import tempfile
import zipfile
from pathlib import Path

ZIP_NAME = "dslc_runtime.zip"
REQUIRED = ("dslc/__init__.py", "dslc/runtime/__init__.py", "dslc/runtime/spark/__init__.py")
_STAMP = (1980, 1, 1, 0, 0, 0)   # fixed entry times: the same sources give the same bytes
# Pure-Python libraries the runtime imports that executors do not have (they have pyspark, pyarrow
# and aiohttp): shipped in the zip beside dslc, from the driver's installation
VENDORED = ("jmespath", "redis")


class RuntimeZipError(RuntimeError):
    """The runtime cannot be shipped to executors; the message says what is wrong."""


def runtime_zip() -> str:
    """Path of the importable runtime zip (built on first use, then reused)."""
    import dslc.runtime as package

    archive = _archive_of(package)
    if archive is not None:          # the driver itself imports dslc from a zip (--py-files)
        check_runtime_zip(archive)
        return archive
    root = Path(package.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    if not files:
        raise RuntimeZipError(f"dslc: error: no runtime sources found under {root}: cannot ship dslc.runtime "
                              "to executors (install dslc on them and set DSLC_SHIP_RUNTIME=0)")
    vendored = _vendored()
    digest = _digest(root, files, vendored)
    target = cache_folder() / f"{_version()}-{digest}" / ZIP_NAME
    if target.is_file():
        try:
            check_runtime_zip(str(target))
            return str(target)
        except RuntimeZipError:
            pass                     # damaged by someone: build it again
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=".zip", dir=target.parent)
    os.close(handle)
    try:
        _write(Path(partial), root, files, vendored)
        check_runtime_zip(partial)
        os.replace(partial, target)  # atomic: a job starting at the same time never ships half a zip
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return str(target)


def _vendored() -> list[tuple[str, Path]]:
    """(name in the zip, file) of each vendored library's sources."""
    found = []
    for name in VENDORED:
        module = importlib.import_module(name)
        folder = Path(module.__file__).resolve().parent
        for file in sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts):
            found.append(("/".join((name, *file.relative_to(folder).parts)), file))
    return found


def _write(path: Path, root: Path, files: list[Path], vendored: list[tuple[str, Path]] = ()) -> None:
    """Folder entries and `__init__.py` files first, so the zip importer sees the packages."""
    folders = sorted({f.parent.relative_to(root) for f in files}, key=lambda p: (len(p.parts), str(p)))
    entries = [("/".join(("dslc", "runtime", *file.relative_to(root).parts)), file) for file in files]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("dslc/", _STAMP), b"")
        archive.writestr(zipfile.ZipInfo("dslc/__init__.py", _STAMP), '"""dslc runtime, shipped to executors."""\n')
        for folder in folders:
            name = "/".join(("dslc", "runtime", *folder.parts)) + "/"
            archive.writestr(zipfile.ZipInfo(name, _STAMP), b"")
        for name, file in entries + list(vendored):
            info = zipfile.ZipInfo(name, _STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, file.read_bytes())


def check_runtime_zip(path: str) -> None:
    """Raise RuntimeZipError naming what is missing when `path` would not import as dslc.runtime."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            damaged = archive.testzip()
    except (OSError, zipfile.BadZipFile) as exc:
        raise RuntimeZipError(f"dslc: error: runtime zip {path} cannot be read: {exc}") from exc
    if damaged is not None:
        raise RuntimeZipError(f"dslc: error: runtime zip {path} is damaged: bad CRC in {damaged}")
    missing = [name for name in REQUIRED if name not in names]
    if "dslc/__init__.py" in missing and "dslc/" in names:
        missing.remove("dslc/__init__.py")   # a namespace package `dslc` (as pip installs it) imports too
    if missing:
        what = "it is empty" if not names else "it lacks " + ", ".join(missing)
        raise RuntimeZipError(f"dslc: error: runtime zip {path} cannot be imported on executors: {what}")


def cache_folder() -> Path:
    """A folder only this user can write: $XDG_CACHE_HOME/dslc (or ~/.cache/dslc), else <tmp>/dslc-<uid>."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for folder in (Path(base) / "dslc", Path(tempfile.gettempdir()) / f"dslc-{_uid()}"):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        if _private(folder):
            return folder
    raise RuntimeZipError(f"dslc: error: no private folder for the runtime zip: {Path(base) / 'dslc'} and "
                          f"{Path(tempfile.gettempdir()) / f'dslc-{_uid()}'} are missing, not writable or "
                          "writable by others; set XDG_CACHE_HOME to a folder of your own")


def _private(folder: Path) -> bool:
    """Owned by this user and writable by nobody else (so nobody can swap the zip)."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or not os.access(folder, os.W_OK):
        return False
    return (not hasattr(os, "getuid") or info.st_uid == os.getuid()) and not info.st_mode & 0o022


def _uid() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("dslc")
    except Exception:   # running from a source tree that is not installed
        return "0"


def _digest(root: Path, files: list[Path], vendored: list[tuple[str, Path]] = ()) -> str:
    """Content hash of the runtime sources (and the vendored ones): an edited runtime (a
    development checkout) or another library version gets its own zip."""
    digest = hashlib.sha256()
    for name, file in [(str(f.relative_to(root)), f) for f in files] + list(vendored):
        digest.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _archive_of(package) -> str | None:
    """The zip file `package` was imported from, if any."""
    loader = getattr(getattr(package, "__spec__", None), "loader", None)
    archive = getattr(loader, "archive", None)
    return os.path.abspath(archive) if archive else None
