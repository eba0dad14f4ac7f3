-- The append's statement (gloveapp/conversations/append.py), 8
-- message(s) to one session, as bench/rest.py generated it from the code;
-- pgbench -M prepared -D name=value ... -f runs it (the values as parameters).
-- Then the wait for the disk (early lock release).
WITH s AS (
UPDATE conversations_session t
SET updated_at = :now, last_seq = t.last_seq + :count,
title = CASE WHEN t.title = '' THEN :title ELSE t.title END
FROM (SELECT title FROM conversations_session WHERE id = :session_id FOR UPDATE) old
WHERE t.id = :session_id
RETURNING t.last_seq - :count AS base, old.title = '' AS titled,
pg_advisory_xact_lock(:lock_key) AS locked, set_config('synchronous_commit', 'off', true) AS early
), r AS (
SELECT * FROM jsonb_to_recordset(:rows::jsonb) AS x(sender text, msg_id text, text text, framework_context text, reasoning_content text, content jsonb, tool_calls jsonb, tool_results jsonb, extra jsonb, is_compaction boolean, is_skill_injection boolean, ord integer, wire text)
), m AS (
INSERT INTO conversations_message
(session_id, seq, sender, msg_id, text, content, tool_calls, tool_results,
is_compaction, is_skill_injection, framework_context, reasoning_content,
extra, wire, created_at)
SELECT :session_id, s.base + r.ord, r.sender, r.msg_id, COALESCE(r.text, ''),
r.content, r.tool_calls, r.tool_results, r.is_compaction,
r.is_skill_injection, r.framework_context, r.reasoning_content, r.extra,
r.wire, :now
FROM s, r
ORDER BY r.ord
RETURNING id, seq
), e AS (
INSERT INTO conversations_liveevent (stream, type, payload, created_at)
SELECT :stream, x.type, x.payload, :now FROM (
SELECT r.ord, 'message.appended' AS type,
jsonb_build_object('seq', s.base + r.ord, 'message', r.wire::jsonb) AS payload
FROM s, r
) x
ORDER BY x.ord NULLS LAST
RETURNING id
)
SELECT m.id, m.seq, (SELECT count(*) FROM e), s.titled
FROM m, s ORDER BY m.seq;
SELECT pg_current_xact_id();
