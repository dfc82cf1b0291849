SELECT id, tag, pos FROM events LATERAL VIEW posexplode(tags) t AS pos, tag
