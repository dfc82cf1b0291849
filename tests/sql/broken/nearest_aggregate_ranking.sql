-- expect: E0212 3:32 UNSUPPORTED_EXPR_FOR_OPERATOR
SELECT q.qid, a.title FROM questions q JOIN articles a
  APPROX NEAREST 1 BY DISTANCE max(a.pscore)
