-- expect: E0206 3:3
SELECT * FROM questions q NATURAL JOIN articles a
  EXACT NEAREST 2 BY DISTANCE abs(q.score - a.pscore)
