SELECT t.qid, s.title, count(*) OVER (PARTITION BY t.qid) AS matches
FROM (SELECT qid, embedding FROM questions WHERE score > 0) t
  JOIN (SELECT title, embedding FROM articles) s
  EXACT NEAREST 5 BY DISTANCE vector_l2_distance(t.embedding, s.embedding)
