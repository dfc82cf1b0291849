SELECT q.qid, a.doc_id, a.title, vector_l2_distance(q.embedding, a.embedding)
FROM questions q JOIN articles a
  APPROX NEAREST 3 BY DISTANCE vector_l2_distance(q.embedding, a.embedding)
