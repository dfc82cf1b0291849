-- expect: E0212 3:18 NEAREST_BY_JOIN.NUM_RESULTS_OUT_OF_RANGE
SELECT q.qid, a.title FROM questions q JOIN articles a
  APPROX NEAREST 0 BY DISTANCE vector_l2_distance(q.embedding, a.embedding)
