"""The turn queue: how "this session may have a turn to run" reaches a worker.

- `tasks`: the Django task behind every turn (`run_session_turns`) and `enqueue_session`,
  which the entry points (`turns.public`) and the worker's sweep call after a turn is stored;
- `fetch`: inside `turn_worker`, taking those tasks from the configured backend;
- `rq_backend`: django-tasks-rq tuned for these tasks (GLOVE_TASKS_BACKEND=rq).

The queue sits above the worker: its task hands the session to the worker's engine, and the
engine is given `enqueue_session` (its `requeue`) rather than importing it.
"""
