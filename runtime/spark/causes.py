"""What a failed Spark action says, as one line: the innermost cause of its Java exception
(`java.io.IOException: Mkdirs failed to create ...`, `org.apache.spark.SparkException: Malformed
records are detected ...`), never py4j's `An error occurred while calling o106.save.`"""
from __future__ import annotations


def spark_cause(error: BaseException) -> str:
    """The innermost cause of a Spark error, as one line (a Java exception's own message, e.g.
    `java.io.IOException: Mkdirs failed to create file:/...`), else the error's first line."""
    inner = deepest(error)
    if inner is not None:
        try:
            text = str(inner.toString())
            return (text.splitlines() or [text])[0].strip()
        except Exception:  # noqa: BLE001 - a Java object that cannot be asked: the text below
            pass
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    caused = [line for line in lines if line.startswith("Caused by: ")]
    if caused:
        return caused[-1][len("Caused by: "):]
    return lines[0] if lines else type(error).__name__


def deepest(error: BaseException):
    """The innermost Java cause of a Spark error (py4j), or None (Spark Connect: text only)."""
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    if java is None:
        return None
    try:
        inner, seen = java, 0
        while inner.getCause() is not None and seen < 20:
            inner, seen = inner.getCause(), seen + 1
        return inner
    except Exception:  # noqa: BLE001 - a Java object that cannot be asked
        return None
