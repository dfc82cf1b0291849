SELECT upper(kind), concat(kind, '-', qty) AS c, concat_ws(',', tags) AS joined, length(note) AS len,
  substr(note, 2, 3) AS sub, split(note, ',') AS parts, regexp_extract(note, '(\\d+)', 1) AS digits, trim(note) AS t, lpad(kind, 5, '*') AS p FROM events
