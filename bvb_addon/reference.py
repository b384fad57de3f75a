"""Where a reference plane goes so that it exactly fills a camera's view (no bpy).

The numbers follow Blender's own view-plane computation (``BKE_camera_params_compute_viewplane``):
the sensor size is the sensor height only when the fit is explicitly VERTICAL, the fit
actually used by AUTO is the larger of the two pixel-aspect-corrected resolution sides, and
lens shift is measured in units of that fitted side.
"""

from dataclasses import dataclass

from .errors import BVBError

SENSOR_FITS = ("AUTO", "HORIZONTAL", "VERTICAL")


class ReferenceClipError(BVBError, ValueError):
    """Camera or clip settings that cannot give a reference plane; the message names the fix."""


@dataclass(frozen=True)
class PlaneFit:
    """A rectangle in camera space (looking down -Z) that covers the whole camera frame."""

    width: float
    height: float
    offset_x: float
    offset_y: float
    distance: float

    def corners(self) -> list[tuple[float, float, float]]:
        """Camera-space corners in the order bottom-left, bottom-right, top-right, top-left."""
        x0 = self.offset_x - self.width / 2
        x1 = self.offset_x + self.width / 2
        y0 = self.offset_y - self.height / 2
        y1 = self.offset_y + self.height / 2
        z = -self.distance
        return [(x0, y0, z), (x1, y0, z), (x1, y1, z), (x0, y1, z)]


def resolved_fit(
    sensor_fit: str, res_x: float, res_y: float, pixel_aspect_x: float = 1.0, pixel_aspect_y: float = 1.0
) -> str:
    """HORIZONTAL or VERTICAL: the camera side that the sensor size applies to."""
    if sensor_fit not in SENSOR_FITS:
        raise ReferenceClipError(f"unknown sensor fit {sensor_fit!r}; use one of {', '.join(SENSOR_FITS)}")
    if sensor_fit != "AUTO":
        return sensor_fit
    return "HORIZONTAL" if res_x * pixel_aspect_x >= res_y * pixel_aspect_y else "VERTICAL"


def camera_plane(
    distance: float,
    *,
    lens: float,
    sensor_width: float,
    sensor_height: float,
    sensor_fit: str,
    res_x: float,
    res_y: float,
    pixel_aspect_x: float = 1.0,
    pixel_aspect_y: float = 1.0,
    shift_x: float = 0.0,
    shift_y: float = 0.0,
    ortho_scale: float | None = None,
) -> PlaneFit:
    """The plane at ``distance`` in front of the camera that fills its frame exactly.

    ``ortho_scale`` set means an orthographic camera: the fitted side is that many units
    wide at any distance.
    """
    if res_x <= 0 or res_y <= 0:
        raise ReferenceClipError(f"render resolution {res_x}x{res_y} is empty; set a positive resolution")
    if pixel_aspect_x <= 0 or pixel_aspect_y <= 0:
        raise ReferenceClipError("pixel aspect must be positive; fix Output Properties > Format > Aspect")
    if distance <= 0:
        raise ReferenceClipError(f"plane distance {distance} must be positive; put the plane in front of the camera")
    fit = resolved_fit(sensor_fit, res_x, res_y, pixel_aspect_x, pixel_aspect_y)
    if ortho_scale is not None:
        if ortho_scale <= 0:
            raise ReferenceClipError("orthographic scale must be positive; fix the camera's Orthographic Scale")
        fitted = float(ortho_scale)
    else:
        if lens <= 0:
            raise ReferenceClipError(f"camera focal length {lens} must be positive; fix the camera's Focal Length")
        sensor = sensor_height if sensor_fit == "VERTICAL" else sensor_width
        if sensor <= 0:
            raise ReferenceClipError("camera sensor size must be positive; fix the camera's Sensor size")
        fitted = sensor * distance / lens
    # Pixel-aspect-corrected image sides: their ratio is the frame's shape.
    aspect_w = res_x * pixel_aspect_x
    aspect_h = res_y * pixel_aspect_y
    if fit == "HORIZONTAL":
        width, height = fitted, fitted * aspect_h / aspect_w
    else:
        width, height = fitted * aspect_w / aspect_h, fitted
    return PlaneFit(
        width=width,
        height=height,
        offset_x=shift_x * fitted,
        offset_y=shift_y * fitted,
        distance=float(distance),
    )


def plane_distance(clip_start: float, clip_end: float, wanted: float = 1.0) -> float:
    """A distance between the camera's clip planes, as near ``wanted`` as they allow."""
    if clip_end <= clip_start:
        raise ReferenceClipError(
            f"camera clip end {clip_end} is not past clip start {clip_start}; fix the camera's Clip"
        )
    low = clip_start * 1.5
    high = clip_end * 0.9
    if low >= high:
        return (clip_start + clip_end) / 2
    return min(max(wanted, low), high)


def clip_frame_user(frame_count: int, scene_frame_start: int) -> dict[str, int]:
    """Image-user settings that show clip frame k at scene frame ``scene_frame_start + k - 1``."""
    if frame_count < 1:
        raise ReferenceClipError(f"clip has {frame_count} frames; re-encode it or pick another clip")
    return {"frame_duration": int(frame_count), "frame_start": int(scene_frame_start), "frame_offset": 0}
