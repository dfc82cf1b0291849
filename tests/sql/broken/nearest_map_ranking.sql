-- expect: E0212 3:34 NEAREST_BY_JOIN.NON_ORDERABLE_RANKING_EXPRESSION
SELECT q.qid, a.title FROM questions q JOIN articles a
  APPROX NEAREST 1 BY SIMILARITY map(q.score, a.pscore)
