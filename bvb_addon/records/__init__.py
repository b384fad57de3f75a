"""Typed records of the files that cross between the agent loop, the runner, the add-on and the scorers.

One module per record, each with one reader and one writer and a format version. A file that does
not parse, or parses to the wrong shape, is a one-line ``BadFileError`` naming it (exit 2). Keys a
record does not know (a newer harness, a stage that stamps its own) are kept, not dropped.
stdlib only: the add-on reads these inside Blender.
"""

from .agent_meta import AGENT_META_FORMAT, AgentMeta, read_agent_meta, write_agent_meta
from .render_row import RenderRow, read_render_rows, render_status_text
from .run_config import RUN_CONFIG_FORMAT, RunConfig, read_run_config, write_run_config

__all__ = [
    "AGENT_META_FORMAT",
    "RUN_CONFIG_FORMAT",
    "AgentMeta",
    "RenderRow",
    "RunConfig",
    "read_agent_meta",
    "read_render_rows",
    "read_run_config",
    "render_status_text",
    "write_agent_meta",
    "write_run_config",
]
