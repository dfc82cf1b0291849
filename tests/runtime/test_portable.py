"""portable(): a dslc function pickled with the runtime zip and user modules, loaded and called in a
Python where dslc cannot be imported (as in a Spark Connect server's foreachBatch worker)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
from pyspark.serializers import CloudPickleSerializer

from dslc.runtime.spark import names
from dslc.runtime.spark.portable import portable
from dslc.runtime.spark.runtime_zip import runtime_zip

# Runs with `python -S` (no site-packages, so no installed or editable dslc) plus pyspark's folder,
# and a finder that refuses a top-level `dslc` from anywhere but the folder portable() unpacks to
# (pyspark's folder may hold an installed dslc too).
WORKER = """
import importlib.machinery, pickle, sys
sys.path.append({pyspark_site!r})

class OnlyUnpacked:
    def find_spec(self, name, path=None, target=None):
        if name != "dslc":
            return None
        allowed = [p for p in sys.path if "dslc-connect-" in p]
        spec = importlib.machinery.PathFinder.find_spec(name, allowed)
        if spec is None:
            raise ModuleNotFoundError("No module named 'dslc'", name=name)
        return spec

sys.meta_path.insert(0, OnlyUnpacked())
try:
    import dslc
    print("dslc importable before the call")
except ModuleNotFoundError:
    pass
for path in sys.argv[1:]:
    print(pickle.loads(open(path, "rb").read())(*{args!r}))
print(sorted(p.split("/")[-1] for p in sys.path if "dslc-connect-" in p))
"""


def test_a_portable_function_runs_where_dslc_cannot_be_imported(tmp_path):
    (tmp_path / "usermod_portable.py").write_text("def twice(name):\n    return name + name\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import usermod_portable

        files = [runtime_zip(), str(tmp_path / "usermod_portable.py")]
        pickled = []
        for i, function in enumerate((names.quoted, usermod_portable.twice)):
            path = tmp_path / f"function{i}.pickle"
            path.write_bytes(CloudPickleSerializer().dumps(portable(function, files)))
            pickled.append(str(path))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("usermod_portable", None)
    script = WORKER.format(pyspark_site=str(Path(pyspark.__file__).parents[1]), args=("a b",))
    env = {**os.environ, "TMPDIR": str(tmp_path / "worker_tmp")}
    (tmp_path / "worker_tmp").mkdir()
    result = subprocess.run([sys.executable, "-S", "-c", script, *pickled], cwd=tmp_path / "worker_tmp",
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "`a b`" and lines[1] == "a ba b", lines
    assert "dslc importable before the call" not in lines
    assert "dslc_runtime.zip" in lines[2]           # the zip on sys.path, unpacked in the worker's temp folder
    unpacked = list((tmp_path / "worker_tmp").glob("dslc-connect-*/*/usermod_portable.py"))
    assert len(unpacked) == 1
