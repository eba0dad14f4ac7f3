-- The append transaction as it was before issue 13 (nine statements, a row lock and an
-- advisory lock), one message to one session, kept to show how far the floor moved.
BEGIN;
SELECT id FROM conversations_session WHERE id = 'bench_pgbench_old' ORDER BY updated_at DESC LIMIT 1 FOR UPDATE;
SELECT COALESCE(MAX(seq), 0) + 1 AS next_seq FROM conversations_message WHERE session_id = 'bench_pgbench_old' \gset
INSERT INTO conversations_message (session_id, seq, sender, msg_id, text, content, tool_calls, tool_results, is_compaction, is_skill_injection, framework_context, reasoning_content, created_at) VALUES ('bench_pgbench_old', :next_seq, 'user', NULL, 'A flat white, please.', NULL, NULL, NULL, false, false, NULL, NULL, now());
UPDATE conversations_session SET updated_at = now() WHERE id = 'bench_pgbench_old';
SELECT pg_advisory_xact_lock(4242424242);
INSERT INTO conversations_liveevent (stream, type, payload, created_at) VALUES ('session:bench_pgbench_old', 'message.appended', '{"seq": 1, "message": {"sender": "user", "text": "A flat white, please."}}', now());
SELECT pg_notify('glove_live_events', 'session:bench_pgbench_old');
COMMIT;
