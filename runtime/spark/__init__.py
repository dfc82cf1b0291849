"""dslc package: what a job's driver runs on Spark.

Before the first PySpark import of a driver started by spark-submit, PySpark is taken from the
installed package rather than from Spark's source zip (compiled_pyspark.py).
"""
from .compiled_pyspark import prefer_installed_pyspark

prefer_installed_pyspark()
