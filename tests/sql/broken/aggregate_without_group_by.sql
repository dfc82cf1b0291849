-- expect: E0212 2:8 MISSING_GROUP_BY
SELECT kind, sum(amount) AS total FROM events
