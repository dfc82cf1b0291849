SELECT r.id, t.v, p.pos, p.x, e.kind
FROM range(1, 4) r, explode(array(1, 2)) t(v), posexplode(array('a', 'b')) p(pos, x),
  events e
WHERE e.qty > r.id
