"""Frames as BVB's Stage-1 agent extracts them for a ```frames block: each image is, pixel for pixel and byte
for byte, the JPEG that ``ffmpeg -y -ss T -i VIDEO -frames:v 1 -q:v 3 -vf scale=768:-1`` writes (the release runs
one such process per frame), only faster. Which times a block asks for is the protocol's
(agent.mini_bvb_protocol.request); this module serves them.

Each time T gets the first frame at or after T, which is the frame that input seeking to T decodes. Where the
codec's decoding is exact to the bit (EXACT_CODECS, 8-bit 4:2:0), PyAV decodes those frames, each keyframe
interval once from its keyframe over a few threads, skipping the frames nothing refers to, and one ffmpeg process
scales and encodes them from raw video with the release's filter and quality (``_decode_block``): the pixels the
release's decoder makes, its scaler, its encoder. Otherwise, or when that fails, a block is taken in ffmpeg runs:
a run seeks as the release does to its first time and decodes on; the next run starts where seeking again costs
less than decoding on to the next frame's keyframe (SEEK_COST_S against the clip's size). Up to RUNS_PER_PROCESS
runs share one ffmpeg process, each as an input of its own. tests/test_mini_bvb_units.py checks the bytes of both
ways against the per-frame command and bench/frames_block.py measures the gain. A run that fails, or writes
another count of frames than the clip's frame times predict, sends the block to the per-frame command.
Native's frames are bvb_addon.video's (PyAV, the judge's way). bpy-free.
"""

import json
import logging
import os
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SCALE_WIDTH = 768
JPEG_QSCALE = 3
DECODED_AT_ONCE = 60
"""Distinct frames one ``extract`` of a reply takes at a time: the release's cap of one block, so a reply's
decoding memory is one block's."""


@dataclass(frozen=True)
class Frame:
    """One extracted frame: the requested time (after clamping) and its JPEG."""

    t: float
    path: Path


def probe_duration(video: str | Path) -> float:
    """The container's duration as ffprobe reports it (``format=duration``); 0.0 when it has none."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration",
         "-of", "default=noprint_wrappers=1:nokey=1", str(video)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    try:
        return float(result.stdout.strip())
    except ValueError:
        return 0.0


def frame_name(index: int, t: float) -> str:
    """The reference's file name of the index-th frame of a scene."""
    return f"frame_{index:03d}_{t:.3f}.jpg"


def extract_one(video: Path, out_dir: Path, t: float, index: int) -> Frame | None:
    """The reference's method: one ffmpeg process seeking to ``t``; None when ffmpeg writes nothing."""
    t = max(0.0, t)
    dest = out_dir / frame_name(index, t)
    result = subprocess.run(
        ["ffmpeg", "-y", "-ss", f"{t:.3f}", "-i", str(video), "-frames:v", "1", "-q:v", str(JPEG_QSCALE),
         "-vf", f"scale={SCALE_WIDTH}:-1", str(dest)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return Frame(t, dest) if result.returncode == 0 and dest.exists() else None


def extract_per_frame(video: Path, out_dir: Path, times: list[float], start_index: int = 0) -> list[Frame]:
    """The reference's extraction: one process per frame, frames ffmpeg could not write left out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for offset, t in enumerate(times):
        frame = extract_one(video, out_dir, t, start_index + offset)
        if frame is not None:
            frames.append(frame)
    return frames


def _select_expression(times: list[float], offset: str = "") -> str:
    """select's test for "the first frame at or after one of ``times``" (prev_t is NAN on the first frame)."""
    terms = [f"gte(t\\,{t:.3f}{offset})*(isnan(prev_t)+lt(prev_t\\,{t:.3f}{offset}))" for t in times]
    return "+".join(terms)


@dataclass(frozen=True)
class _Clip:
    """The clip's frame and keyframe times from its container's start, that start, and its frame size and rate
    (a demux, no decoding)."""

    frames: list[float]
    keyframes: list[float]
    start_time: float
    pixels: int
    fps: float
    container: str = ""
    """ffprobe's format_name (e.g. ``mov,mp4,m4a,3gp,3g2,mj2``)."""

    @property
    def planned(self) -> bool:
        """Whether frames may be planned from the packets' times: containers whose times ffmpeg's input seek
        honours as the packets state them (MP4/MOV, Matroska/WebM; checked byte for byte). MPEG-TS is not:
        its times and the frame ffmpeg's -ss lands on differ, so it takes the per-frame command itself."""
        return any(name in PLANNED_CONTAINERS for name in self.container.split(","))


def _probe_frames(video: Path) -> _Clip | None:
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "packet=pts_time,flags:format=start_time,format_name:stream=width,height,avg_frame_rate", "-of", "json", str(video)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    try:
        data = json.loads(result.stdout)
        start = float(data.get("format", {}).get("start_time", 0.0) or 0.0)
        stream = (data.get("streams") or [{}])[0]
        num, _, den = str(stream.get("avg_frame_rate", "0/1")).partition("/")
        fps = float(num) / float(den or 1) if float(den or 1) else 0.0
        packets = [p for p in data.get("packets", []) if "pts_time" in p]
        frames = sorted(float(p["pts_time"]) - start for p in packets)
        keys = sorted(float(p["pts_time"]) - start for p in packets if "K" in p.get("flags", ""))
        pixels = int(stream.get("width", 0)) * int(stream.get("height", 0))
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    container = str(data.get("format", {}).get("format_name", ""))
    return _Clip(frames, keys, start, pixels, fps or 30.0, container)


PLANNED_CONTAINERS = {"mov", "mp4", "matroska", "webm"}
"""ffprobe format names whose clips the one pass takes (``_Clip.planned``); others get the per-frame command."""


SEEK_COST_S = 0.1
"""What starting a run costs beside its decoding (its input opened and a seek, its decoder started)."""
DECODE_PIXELS_PER_S = 300 * 1920 * 1440
"""H.264 decoding speed here (1920x1440 at about 300 frames a second with 2 threads), to weigh decoding on
against seeking."""
RUNS_PER_PROCESS = 8
"""Runs one ffmpeg process takes as inputs of its own (each with its decoder, so memory grows with them)."""


def _runs(wanted: list[float], frame_of: dict[float, float], clip: _Clip) -> list[list[float]]:
    """The block's times in runs: the next run starts with a seek of its own when decoding on from the last
    frame taken to the keyframe before its frame would cost more than a seek does."""
    gap = SEEK_COST_S * DECODE_PIXELS_PER_S / max(1, clip.pixels) / clip.fps
    runs: list[list[float]] = []
    for t in wanted:
        if runs:
            key = max((k for k in clip.keyframes if k <= frame_of[t] + 1e-9), default=0.0)
            if key - frame_of[runs[-1][-1]] <= gap:
                runs[-1].append(t)
                continue
        runs.append([t])
    return runs


def _run_batch(
    video: Path, work: Path, batch: int, runs: list[tuple[list[float], int]], seek: bool
) -> list[list[Path]] | None:
    """One ffmpeg process writing the frames of some runs (an input and an output each), each run's in time order
    (``count`` distinct ones); None if it failed.

    With ``seek`` each input starts as the reference's command does for its run's first time (input seeking,
    accurate; original timestamps kept, so select compares the times the reference seeks to); else the one run
    decodes from the start (-ss 0 keeps the reference's time origin, the container's start)."""
    command = ["ffmpeg", "-y", "-v", "error"] + (["-copyts"] if seek else [])
    for times, _ in runs:
        command += ["-ss", f"{times[0]:.3f}" if seek else "0", "-i", str(video)]
    for index, (times, count) in enumerate(runs):
        command += ["-map", f"{index}:v:0", "-vf", f"select='{_select_expression(times)}',scale={SCALE_WIDTH}:-1",
                    "-fps_mode", "passthrough", "-frames:v", str(count), "-q:v", str(JPEG_QSCALE), "-f", "image2",
                    str(work / f"{batch:03d}-{index:02d}-%04d.jpg")]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        log.warning("frames: extraction of a run failed (%s); one process per frame", result.stderr[-300:])
        return None
    return [sorted(work.glob(f"{batch:03d}-{index:02d}-*.jpg")) for index in range(len(runs))]


DECODE_THREADS = 4
"""At most this many threads decode a block's keyframe intervals (one container each; fewer on fewer cores)."""
EXACT_CODECS = frozenset({"h264", "hevc", "vp8", "vp9", "av1"})
"""Codecs whose decoding the standard fixes to the bit, so PyAV's FFmpeg decodes the pictures the ffmpeg command
does (MPEG-2 and MPEG-4 part 2 allow IDCTs that differ: those clips take the ffmpeg runs)."""
_TIME_TOLERANCE_S = 1e-4
"""ffprobe prints times to the microsecond; frames are further apart than this."""


def _decode_block(video: Path, clip: _Clip, frames: list[float], work: Path) -> list[Path] | None:
    """The JPEGs of these frame times (sorted, from the container's start), in their order; None where this way
    does not apply or fails.

    PyAV decodes each frame from the keyframe before it, one keyframe interval at a time over threads: it skips
    the frames nothing refers to unless one is wanted, and drains the decoder once the interval's last wanted
    packet is in. The decoded pictures (the same bits whichever FFmpeg decodes these codecs) go as raw video to
    one ffmpeg process running the reference's scale and JPEG encoder, so the bytes are the per-frame command's.
    It applies to what was checked to give those bytes: a codec of EXACT_CODECS, 8-bit 4:2:0 of even size,
    limited or unmarked range, the sample aspect ratio the container or the stream gives passed on."""
    try:
        import av  # deferred: a Blender without the extension's wheels lacks PyAV; then the per-frame commands run
    except ImportError:
        return None
    groups: dict[float, list[float]] = {}
    for f in frames:
        key = max((k for k in clip.keyframes if k <= f + 1e-9), default=0.0)
        groups.setdefault(key, []).append(f)
    containers: list = []
    lock = threading.Lock()
    local = threading.local()

    def stream_of() -> Any:
        if getattr(local, "stream", None) is None:
            container = av.open(str(video))
            with lock:
                containers.append(container)
            local.container, local.stream = container, container.streams.video[0]
            local.stream.thread_count = 1  # threads over intervals; skip_frame changes per packet need one
        return local.stream

    def decode(item: tuple[float, list[float]]) -> list[bytes]:
        key, wanted = item
        stream = stream_of()
        base, codec = stream.time_base, stream.codec_context
        absolute = [clip.start_time + f for f in wanted]
        found: dict[int, bytes] = {}
        sent = 0

        def take(decoded: list) -> None:
            for frame in decoded:
                if frame.pts is None:
                    continue
                at = float(frame.pts * base)
                for i, t in enumerate(absolute):
                    if abs(at - t) < _TIME_TOLERANCE_S and i not in found:
                        # A stream that changes its format midway would be converted here, not passed on.
                        if (frame.format.name, frame.width, frame.height) != shape or int(frame.color_range) > 1:
                            raise ValueError(f"the frame at {at:.3f} s is not {shape[0]} {shape[1]}x{shape[2]}")
                        found[i] = frame.to_ndarray(format="yuv420p").tobytes()

        local.container.seek(int(round((clip.start_time + key) / base)), stream=stream, backward=True)
        first = True
        for packet in local.container.demux(stream):
            at = None if packet.pts is None else float(packet.pts * base)
            # Decoding must start at that keyframe, as the reference's does (a container without an index,
            # MPEG-TS, may seek elsewhere: then the ffmpeg runs take the block).
            if first and not (packet.is_keyframe and at is not None and abs(at - clip.start_time - key) < 1e-3):
                raise ValueError(f"the seek to the keyframe at {key:.3f} s landed elsewhere")
            first = False
            wanted_here = at is None or any(abs(at - t) < _TIME_TOLERANCE_S for t in absolute)
            codec.skip_frame = "DEFAULT" if wanted_here else "NONREF"
            take(packet.decode())
            sent += at is not None and wanted_here
            if sent == len(absolute) or len(found) == len(absolute) or (at is not None and at > absolute[-1] + 60):
                break
        codec.skip_frame = "DEFAULT"
        if len(found) < len(absolute):
            try:
                take(codec.decode(None))  # what the decoder holds back for reordering
            except av.error.EOFError:
                pass  # the demuxer's end drained it already
        if len(found) < len(absolute):
            raise ValueError(f"{len(absolute) - len(found)} frames not decoded after the keyframe at {key:.3f} s")
        return [found[i] for i in range(len(absolute))]

    try:
        with av.open(str(video)) as container:
            stream = container.streams.video[0]
            codec = stream.codec_context
            sar = stream.sample_aspect_ratio or codec.sample_aspect_ratio
            shape = (codec.format.name if codec.format else None, codec.width, codec.height)
            plain = shape[0] == "yuv420p" and codec.width % 2 == 0 and codec.height % 2 == 0 and codec.width > 0
            plain = plain and codec.name in EXACT_CODECS
            plain = plain and int(codec.color_range or 0) in (0, 1)  # unspecified or limited (MPEG)
            # Read while the container is open: older PyAV (a Debian root's) asserts on a closed one's streams.
            plain = plain and stream.time_base is not None
        if not plain:
            return None
    except Exception:  # any PyAV failure (its versions differ): the ffmpeg runs take the block
        return None
    setsar = f"setsar={sar.numerator}/{sar.denominator}," if sar else ""
    command = ["ffmpeg", "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{shape[1]}x{shape[2]}",
               "-i", "-", "-vf", f"{setsar}scale={SCALE_WIDTH}:-1", "-fps_mode", "passthrough",
               "-q:v", str(JPEG_QSCALE), "-f", "image2", str(work / "decoded-%04d.jpg")]  # fmt: skip
    # stderr to a file: a pipe nobody reads while the frames are written could fill and stall the encoder.
    with open(work / "encoder.log", "wb") as log_file:
        encoder = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=log_file)
    stdin = encoder.stdin
    assert stdin is not None
    threads = max(1, min(DECODE_THREADS, os.cpu_count() or 1, len(groups)))
    failure = None
    try:
        with ThreadPoolExecutor(threads) as pool:
            items = sorted(groups.items())
            # A window of intervals in flight keeps memory at a few frames while the encoder takes them in order.
            pending = [pool.submit(decode, item) for item in items[: 2 * threads]]
            for next_item in range(2 * threads, len(items) + 2 * threads):
                if not pending:
                    break
                pictures = pending.pop(0).result()
                if next_item < len(items):
                    pending.append(pool.submit(decode, items[next_item]))
                for picture in pictures:
                    stdin.write(picture)
    except Exception as error:  # PyAV's way is an optimisation: on any failure the ffmpeg runs take the block
        failure = error
    finally:
        with lock:
            for container in containers:
                container.close()
        try:
            stdin.close()
        except OSError:
            pass
        encoder.wait()
        stderr = (work / "encoder.log").read_text(errors="replace")
    if failure is not None or encoder.returncode != 0:
        log.warning("frames: decoding the block with PyAV failed (%s); ffmpeg runs instead", failure or stderr[-300:])
        return None
    written = sorted(work.glob("decoded-*.jpg"))
    return written if len(written) == len(frames) else None


def extract(video: str | Path, out_dir: str | Path, times: list[float], start_index: int = 0) -> list[Frame]:
    """The frames of one block, named and ordered as the reference's (a time past the last frame has none)."""
    video, out_dir = Path(video), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not times:
        return []
    times = [max(0.0, t) for t in times]
    clip = _probe_frames(video)
    if clip is None or not clip.planned:
        return extract_per_frame(video, out_dir, times, start_index)
    # ffmpeg's -ss takes a time as the reference formats it (milliseconds); each time gets the first frame
    # at or after it (what accurate input seeking decodes), and a time past the last frame gets none.
    distinct = sorted({round(t, 3) for t in times})
    frame_of = {}
    for t in distinct:
        later = [f for f in clip.frames if f >= t - 1e-9]
        if later:
            frame_of[t] = later[0]
    wanted = [t for t in distinct if t in frame_of]
    # Seeking keeps the original timestamps, which count from the container's start only when it is 0.
    seek = clip.start_time == 0
    runs = [r for r in (_runs(wanted, frame_of, clip) if seek else [wanted]) if r]
    work = out_dir / ".block"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path_of: dict[float, Path] = {}
    decoded = sorted({frame_of[t] for t in wanted})
    jpegs = _decode_block(video, clip, decoded, work) if decoded else None
    if jpegs is not None:
        path_of.update(zip(decoded, jpegs, strict=True))
        runs = []
    for batch, first in enumerate(range(0, len(runs), RUNS_PER_PROCESS)):
        frames_of = [sorted({frame_of[t] for t in run}) for run in runs[first : first + RUNS_PER_PROCESS]]
        planned = [(run, len(fs)) for run, fs in zip(runs[first : first + RUNS_PER_PROCESS], frames_of, strict=True)]
        written = _run_batch(video, work, batch, planned, seek)
        if written is None or [len(w) for w in written] != [len(fs) for fs in frames_of]:
            shutil.rmtree(work, ignore_errors=True)
            return extract_per_frame(video, out_dir, times, start_index)
        for fs, ws in zip(frames_of, written, strict=True):
            path_of.update(zip(fs, ws, strict=True))
    frames = []
    for offset, t in enumerate(times):
        source = path_of.get(frame_of.get(round(t, 3), -1.0))
        if source is None:
            continue
        # The reference's name: the scene's count of frames before this block, plus the place in it.
        dest = out_dir / frame_name(start_index + offset, t)
        shutil.copyfile(source, dest)
        frames.append(Frame(t, dest))
    shutil.rmtree(work, ignore_errors=True)
    return frames


def extract_reply(
    video: str | Path, out_dir: str | Path, blocks: list[list[float]], start_index: int = 0
) -> list[list[Frame]]:
    """``extract`` of each block's times in turn (the same frames, names and bytes), with each distinct time of the
    reply extracted once, DECODED_AT_ONCE at a time (the decoding memory of one block): a reply of many
    blocks asking for the same frames costs one decoding of them, not one ffprobe and ffmpeg per block."""
    video, out_dir = Path(video), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    distinct = sorted({max(0.0, t) for times in blocks for t in times})
    work = out_dir / ".reply"
    shutil.rmtree(work, ignore_errors=True)
    source: dict[float, Path] = {}
    for first in range(0, len(distinct), DECODED_AT_ONCE):
        for frame in extract(video, work, distinct[first : first + DECODED_AT_ONCE], start_index=first):
            source[frame.t] = frame.path
    served = []
    index = start_index
    for times in blocks:
        got = []
        for offset, t in enumerate(max(0.0, t) for t in times):
            if t in source:
                # The reference's name: the scene's count of frames before this block, plus the place in it.
                dest = out_dir / frame_name(index + offset, t)
                dest.unlink(missing_ok=True)
                try:
                    os.link(source[t], dest)  # a frame asked for again takes no more disk
                except OSError:  # a file system without hard links (exFAT)
                    shutil.copyfile(source[t], dest)
                got.append(Frame(t, dest))
        index += len(got)
        served.append(got)
    shutil.rmtree(work, ignore_errors=True)
    return served
