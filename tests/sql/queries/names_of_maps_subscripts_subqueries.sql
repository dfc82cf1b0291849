SELECT user_id, map(1, name, 2, country), element_at(array(visits, 2), 1), try_element_at(map('a', credit), 'a'),
  typeof(current_date),
  (SELECT max(price) FROM events WHERE events.user_id = users.user_id AND qty > visits)
FROM users
