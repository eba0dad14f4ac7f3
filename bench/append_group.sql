-- The append's one statement (gloveapp/conversations/append.py), 8
-- message(s) to one session, as bench/rest.py generated it from the code;
-- pgbench -f runs it.
WITH s AS (
UPDATE conversations_session
SET updated_at = now(), last_seq = last_seq + 8,
title = CASE WHEN title = '' THEN 'A flat white, please.' ELSE title END
WHERE id = 'bench_pgbench'
RETURNING last_seq - 8 AS base, title AS title,
pg_advisory_xact_lock(944742086325415868) AS locked, pg_notify('glove_live_events', 'session:bench_pgbench') AS notified
), r AS (
SELECT * FROM jsonb_to_recordset('[{"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 1, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 2, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 3, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 4, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 5, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 6, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 7, "wire": {"sender": "user", "text": "A flat white, please."}}, {"sender": "user", "text": "A flat white, please.", "is_compaction": false, "is_skill_injection": false, "ord": 8, "wire": {"sender": "user", "text": "A flat white, please."}}]'::jsonb) AS x(sender text, msg_id text, text text, framework_context text, reasoning_content text, content jsonb, tool_calls jsonb, tool_results jsonb, extra jsonb, is_compaction boolean, is_skill_injection boolean, ord integer, wire jsonb)
), m AS (
INSERT INTO conversations_message
(session_id, seq, sender, msg_id, text, content, tool_calls, tool_results,
is_compaction, is_skill_injection, framework_context, reasoning_content,
extra, created_at)
SELECT 'bench_pgbench', s.base + r.ord, r.sender, r.msg_id, COALESCE(r.text, ''),
r.content, r.tool_calls, r.tool_results, r.is_compaction,
r.is_skill_injection, r.framework_context, r.reasoning_content, r.extra,
now()
FROM s, r
ORDER BY r.ord
RETURNING id, seq
), e AS (
INSERT INTO conversations_liveevent (stream, type, payload, created_at)
SELECT 'session:bench_pgbench', 'message.appended',
jsonb_build_object('seq', s.base + r.ord, 'message', r.wire), now()
FROM s, r
ORDER BY r.ord
RETURNING id
)
SELECT m.id, m.seq, (SELECT count(*) FROM e), s.title FROM m, s ORDER BY m.seq;
