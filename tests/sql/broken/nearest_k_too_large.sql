-- expect: E0212 3:17 NEAREST_BY_JOIN.NUM_RESULTS_OUT_OF_RANGE
SELECT q.qid, a.title FROM questions q LEFT JOIN articles a
  EXACT NEAREST 100001 BY SIMILARITY vector_inner_product(q.embedding, a.embedding)
