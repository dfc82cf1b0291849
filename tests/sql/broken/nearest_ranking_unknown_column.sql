-- expect: E0204 3:66
SELECT q.qid, a.title FROM questions q JOIN articles a
  APPROX NEAREST 3 BY DISTANCE vector_l2_distance(q.embedding, a.embeding)
