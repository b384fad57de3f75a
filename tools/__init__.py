"""Tools for tests and builds (Debian roots, the scripted model server, the extension build); outside the wheel."""
