"""What the daemon keeps on disk: the event store (SQLite), blobs, and session files."""
