SELECT q.qid, a.doc_id, abs(q.score - a.pscore) AS gap
FROM questions q LEFT JOIN articles a APPROX NEAREST 100000 BY DISTANCE abs(q.score - a.pscore)
