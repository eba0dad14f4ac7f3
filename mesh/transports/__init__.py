"""Mesh transports: in-process (embedded default), Redis pub/sub, and the database.

Each transport is a class built from a `MESH` setting's `CONFIG` (see `mesh.layers`) whose
`adapter(agent_id)` returns that agent's `MeshAdapter`. The in-process and Redis transports
are Django-free; the database transport lives in `mesh.transports.database`.
"""
