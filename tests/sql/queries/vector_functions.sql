SELECT vector_norm(embedding), vector_norm(embedding, 1.0F), vector_normalize(embedding),
  vector_normalize(embedding, float('inf')) AS unit, vector_l2_distance(embedding, embedding) AS d,
  vector_cosine_similarity(embedding, vector_normalize(embedding)) AS same
FROM articles
