SELECT address.city, address.zip AS zip, named_struct('a', qty, 'b', kind) AS s, struct(id, kind) AS plain FROM events
