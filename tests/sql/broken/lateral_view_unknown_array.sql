-- expect: E0204 3:34
SELECT id, tag
FROM events LATERAL VIEW explode(tagz) t AS tag
