-- expect: E0212 2:18 NEAREST_BY_JOIN.UNSUPPORTED_JOIN_TYPE
FROM questions q RIGHT OUTER JOIN articles a
  EXACT NEAREST 1 BY DISTANCE vector_l2_distance(q.embedding, a.embedding)
SELECT q.qid, a.title
