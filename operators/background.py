"""The add-on's one timer: it drains every background job (bvb_addon.jobs) on Blender's main thread.

Operators start jobs in ``registry`` keyed by (kind, scene name) and return at once; their
results reach the scene here. The timer is registered with the operators and unregistered
with them: a timer left registered crashes the bpy module at exit.
"""

import bpy

from ..bvb_addon import jobs

INTERVAL_S = 0.25

registry = jobs.JobRegistry()


def start(key, work, on_progress=None, on_done=None, expected=()):
    """Submit a job; the timer's next tick (or a test's ``drain()``) starts its thread (bvb_addon.jobs says why)."""
    return registry.submit(jobs.Job(key, work, on_progress=on_progress, on_done=on_done, expected=expected))


def running(kind, scene):
    return (kind, scene.name) in registry


def drain():
    """Apply what the jobs posted since the last call; returns how many are still running (tests pump this)."""
    return registry.drain()


def redraw_views():
    """Tag every 3D view for a redraw (its sidebar holds the BVB panels); returns how many were tagged.

    A property a job's callback sets from a timer does not repaint the sidebar by itself (a
    failed render's line stayed unseen until the mouse moved over it).
    """
    tagged = 0
    for screen in bpy.data.screens:
        for area in screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()
                tagged += 1
    return tagged


def tick():
    """The timer: apply the jobs' events, and repaint while a job ran this tick (its progress, its end)."""
    if len(registry):
        drain()
        redraw_views()
    return INTERVAL_S


def register():
    # Persistent: opening a file must not drop the one timer every job relies on.
    if not bpy.app.timers.is_registered(tick):
        bpy.app.timers.register(tick, first_interval=INTERVAL_S, persistent=True)


def unregister():
    # Disabling the add-on stops every job; an agent finishes its current step and saves.
    registry.cancel_all()
    if bpy.app.timers.is_registered(tick):
        bpy.app.timers.unregister(tick)
