"""Typed records of the files that cross between the agent loop, the runner, the add-on and the scorers.

One module per record, each with one reader and one writer and a format version. A file that does
not parse, or parses to the wrong shape, is a one-line ``BadFileError`` naming it (exit 2). Keys a
record does not know (a newer harness, a stage that stamps its own) are kept, not dropped.
stdlib only: the add-on reads these inside Blender, and the scorers (eval_bridge) import them without
the agent package: this is the one home of every record, whichever side writes it.
"""

from .agent_meta import AGENT_META_FORMAT, AgentMeta, read_agent_meta, write_agent_meta
from .dual_vqa import DV_FORMAT, DVRow, DVSummary, read_dv_rows, read_dv_summary, write_dv_rows, write_dv_summary
from .overall import OVERALL_FORMAT, OverallRecord, read_overall, write_overall
from .render_row import RenderRow, read_render_rows, render_status_text
from .run_config import RUN_CONFIG_FORMAT, RunConfig, read_run_config, write_run_config
from .vgi_scores import (
    VGI_FORMAT,
    VGIRow,
    VGISummary,
    read_vgi_rows,
    read_vgi_summary,
    write_vgi_rows,
    write_vgi_summary,
)
from .vision_sim import LS_FORMAT, LSRow, LSSummary, read_ls_rows, read_ls_summary, write_ls_rows, write_ls_summary

__all__ = [
    "AGENT_META_FORMAT",
    "DV_FORMAT",
    "LS_FORMAT",
    "OVERALL_FORMAT",
    "RUN_CONFIG_FORMAT",
    "VGI_FORMAT",
    "AgentMeta",
    "DVRow",
    "DVSummary",
    "LSRow",
    "LSSummary",
    "OverallRecord",
    "RenderRow",
    "RunConfig",
    "VGIRow",
    "VGISummary",
    "read_agent_meta",
    "read_dv_rows",
    "read_dv_summary",
    "read_ls_rows",
    "read_ls_summary",
    "read_overall",
    "read_render_rows",
    "read_run_config",
    "read_vgi_rows",
    "read_vgi_summary",
    "render_status_text",
    "write_agent_meta",
    "write_dv_rows",
    "write_dv_summary",
    "write_ls_rows",
    "write_ls_summary",
    "write_overall",
    "write_run_config",
    "write_vgi_rows",
    "write_vgi_summary",
]
