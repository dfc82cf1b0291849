"""User modules shipped to executors: a clash of names is refused before it can break the session."""
import pytest

from dslc.runtime.spark.session import ship_modules


def test_a_second_module_of_the_same_name_is_refused_and_the_session_still_runs(spark, tmp_path):
    for folder, body in (("one", "VALUE = 1\n"), ("two", "VALUE = 2\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "clash_mod.py").write_text(body)
    ship_modules(spark, str(tmp_path / "one"), ("clash_mod",))
    ship_modules(spark, str(tmp_path / "one"), ("clash_mod",))      # the same file again is fine
    with pytest.raises(SystemExit) as refused:
        ship_modules(spark, str(tmp_path / "two"), ("clash_mod",))
    assert "already runs a different module named 'clash_mod.py'" in str(refused.value)
    # Spark never saw the clash, so tasks still fetch their files.
    assert spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).sum() == 10
