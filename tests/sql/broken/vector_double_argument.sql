-- expect: E0212 2:38 DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE
SELECT vector_l2_distance(embedding, wide) FROM articles
