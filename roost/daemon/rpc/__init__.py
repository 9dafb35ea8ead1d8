"""The daemon's face: its lifetime (lock, socket, signals), client connections, and the
method table that answers them."""
