"""A model of Spark SQL's analyzer over sqlglot trees (parsing, names, types, argument counts, aggregation), without a JVM; a leaf the plan uses."""
