"""Glove's remote store over REST: what a glove-react client calls (`createRemoteStore`'s
sessions, messages, counters, tasks, permissions and inbox, and the endpoint model's
`/api/chat`)."""
