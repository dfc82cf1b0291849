"""PySpark's Python worker daemon, started from the compiled PySpark with the chain's modules loaded.

Spark starts one daemon per executor (`spark.python.daemon.module`, pyspark.daemon by default)
and forks a Python worker from it for each task slot. `dslc run` on a local master names this
module instead: it imports PySpark from the installed package rather than from its source zip
(compiled_pyspark.py), and loads what every chain's worker imports (pyarrow, the chain's runtime)
once in the daemon, so that each forked worker starts with them instead of importing them
again, all at once, on the same cores (bench/run_start.py). Only where dslc is installed: a
cluster's executors, which may not have it, keep Spark's own daemon. It and its workers die
with the JVM (orphans.py), so a killed `dslc run` leaves none of them sending calls.
"""
# isort: off
import dslc.runtime.spark  # noqa: F401 - first: its __init__ puts the compiled PySpark before the zip

from pyspark import daemon  # noqa: E402 - after the path is set

try:   # loaded before the fork; a worker that cannot load them says why when its task runs
    import dslc.runtime.core.arrow_chain  # noqa: E402, F401
except Exception:  # noqa: BLE001
    pass

if __name__ == "__main__":
    from dslc.runtime.spark.orphans import die_with_parent

    die_with_parent(group=True)     # the JVM gone, this daemon and its workers go (orphans.py)
    daemon.manager()
