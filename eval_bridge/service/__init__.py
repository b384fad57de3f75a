"""The scoring service: the HTTP app and its loopback server."""
