SELECT decode(qty, 1, 'one', 2, 'two', 'many'), decode(raw, 'utf-8'), to_number(note, '00,000.9MI'),
  json_object_keys(note), getbit(id, 3), get(scores, 0), try_divide(INTERVAL 2 YEAR, 2),
  CASE WHEN flag THEN tiny ELSE ratio END, IF(flag, small, ratio)
FROM events
