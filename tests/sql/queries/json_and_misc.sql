SELECT get_json_object(note, '$.a') AS a, from_json(note, 'a INT, b STRING') AS parsed, to_json(address) AS js,
  md5(note) AS h, hash(id) AS hh, uuid() AS u, monotonically_increasing_id() AS mid FROM events
