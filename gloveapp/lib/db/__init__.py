"""The database helpers every app uses: prepared statements, outages, statement waits,
batched deletes, migration operations, day partitions and the replica router."""
