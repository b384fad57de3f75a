"""The scoring service: its options and command line (light), the HTTP app and its loopback server."""
