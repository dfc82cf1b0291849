SELECT title, vector_avg(embedding), vector_sum(embedding) AS total
FROM articles GROUP BY title
