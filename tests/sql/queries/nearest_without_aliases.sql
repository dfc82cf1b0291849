SELECT questions.qid, upper(articles.title), vector_inner_product(questions.embedding, articles.embedding)
FROM questions INNER JOIN articles
  exact nearest 2 by similarity vector_inner_product(questions.embedding, articles.embedding)
WHERE questions.score > 1
