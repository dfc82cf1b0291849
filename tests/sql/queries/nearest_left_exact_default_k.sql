SELECT *
FROM questions q LEFT OUTER JOIN articles a
  EXACT NEAREST BY SIMILARITY vector_cosine_similarity(q.embedding, a.embedding)
