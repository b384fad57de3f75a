"""``bvb human pack``: a blinded study page and, apart from it, the key that unblinds its answers.

BVB (as the release's eval/human study): each scene's source clip beside K reconstructions (the
runs' camera renders) under letter codes drawn per scene; a rater ranks them from most to least
like the source. VGI: each item is one generator's video of one instance, under a code, beside the
instance's start image, constraint, completion criteria and rules; a rater says complete / partial
/ failed and counts each rule's violations. Every clip is decoded and encoded again (smaller, and
with nothing of its file left: no name, no encoder tag, no metadata that could name a model) and
embedded in the one HTML file (media.py), so the page works opened as a file or served by ``bvb human
serve``. The key (key.py) holds what the page must not: which code is which run or generator.
"""

import logging
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from bvb_addon import path_args
from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.dataset import read_split
from bvb_addon.options import option
from bvb_addon.progress import bar as progress_bar
from bvb_addon.run_dir import RunDir
from bvb_addon.vgi.suite import read_tasks

from ..pages.html_page import Script, csp, render
from .key import BVB_INSTRUMENT, KEY, PAGE, VGI_INSTRUMENT, HumanStudyError, judge_rows, new_key
from .media import ClipOptions, clip_data_uri, image_data_uri

log = logging.getLogger(__name__)

ASSETS = Path(__file__).with_name("page")
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_OUT = "folder for study.html and key.json"
_SEED = "seed of the draw, the order and the codes"
_FORCE = "replace a study already in --out (its answers then cannot be scored)"


@dataclass(frozen=True)
class BVBPackOptions:
    """A BVB ranking study: runs (``DIR`` or ``LABEL=DIR``) and the scenes to rank."""

    runs: tuple[str, ...] = option(help="run directories (DIR or LABEL=DIR), two or more")
    out: Path = option(help=_OUT)
    scenes: tuple[str, ...] | None = option(
        None, "scenes to rank (default: --count drawn among those every run rendered)", nargs="+"
    )
    count: int = option(9, "scenes drawn when --scenes is not given")
    seed: int = option(0, _SEED)
    split: Path | None = option(None, "split file naming each scene's dataset (default: the first run's config.json)")
    videos: Path | None = option(
        None, "source videos root, <root>/<dataset>/<scene>.mp4 (default: the first run's config.json)"
    )
    clips: ClipOptions = option(default_factory=ClipOptions, help="how clips are re-encoded for the page")
    language: Literal["en", "zh"] = option("en", "language of the release's rater instructions")
    # The release: 16 forms of 9 of its 24 scenes, drawn evenly across the scenes' datasets.
    forms: int = option(1, "pages for different raters, each its own draw of --per-form scenes")
    per_form: int | None = option(None, "scenes on each form (default: every scene drawn)")
    force: bool = option(False, _FORCE)


@dataclass(frozen=True)
class VGIPackOptions:
    """A VGI rating study: a tasks file and generators' video folders (``LABEL=DIR``)."""

    tasks: Path = option(help="the tasks file (tasks.jsonl: constraint, rubric, completeness, start_image)")
    generators: tuple[str, ...] = option(
        help="each generator's folder of <instance id>.mp4 (DIR or LABEL=DIR)", flag="--videos"
    )
    out: Path = option(help=_OUT)
    scores: Path | None = option(
        None,
        "the folder bvb score vgi --out wrote (judge rows: <scores>/<label>/vgi.jsonl; default: give it to score)",
    )
    rows: tuple[str, ...] = option(
        (), "LABEL=FILE: a generator's judge rows kept elsewhere (default: none; --scores)", nargs="+"
    )
    instances: tuple[str, ...] | None = option(None, "instance ids to rate (default: --count drawn, or all)", nargs="+")
    count: int | None = option(None, "instances drawn when --instances is not given (default: all)")
    seed: int = option(0, _SEED)
    clips: ClipOptions = option(default_factory=ClipOptions, help="how clips are re-encoded for the page")
    force: bool = option(False, _FORCE)


@dataclass(frozen=True)
class PackResult:
    """A study built: its key (key.json as written) and where its pages and key are."""

    kind: Literal["bvb", "vgi"]
    """bvb: a ranking study; vgi: a rating study."""
    out: Path
    """The study's folder: study.html (or one study-r<N>.html per form) and key.json."""
    key: dict[str, Any] = field(default_factory=dict)
    """key.json as written: which code is which run or generator, the forms, the pack id."""
    what: str = ""
    """What the pages hold, in words ("9 scenes x 3 reconstructions")."""


def check(options: "BVBPackOptions | VGIPackOptions") -> None:
    """Counts and sizes of at least 1, before anything is read or written (a HumanStudyError naming the flag)."""
    values = [("--count", options.count), ("--max-side", options.clips.max_side),
              ("--max-frames", options.clips.max_frames)]  # fmt: skip
    if isinstance(options, BVBPackOptions):
        values += [("--forms", options.forms), ("--per-form", options.per_form)]
    for flag, value in values:
        if value is not None and value < 1:
            raise HumanStudyError(f"{flag} {value}: give a number of at least 1")


def pack(options: "BVBPackOptions | VGIPackOptions") -> PackResult:
    """``bvb human pack bvb|vgi``: the study page(s) and key.json in ``options.out``."""
    check(options)
    path_args.check(
        folders=[("--out", options.out), ("--scores", getattr(options, "scores", None))],
        files=[("--tasks", getattr(options, "tasks", None))],
    )
    if isinstance(options, BVBPackOptions):
        key = pack_bvb(options)
        return PackResult(
            "bvb", Path(options.out), key, f"{len(key['scenes'])} scenes x {len(key['models'])} reconstructions"
        )
    key = pack_vgi(options)
    return PackResult("vgi", Path(options.out), key, f"{len(key['items'])} videos of {len(key['instances'])} instances")


# --- the page -----------------------------------------------------------------------------------


@cache
def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def study_policy(script: Script) -> str:
    """The report's policy (only the page's own script runs, nothing leaves) plus the embedded clips."""
    return csp([script]) + "; media-src data: 'self'"


def write_page(out: Path, data: dict[str, Any], title: str, instructions: str, name: str = PAGE) -> Path:
    """A study page (study.html): the page template, its one script, and the study's data as a JSON block."""
    script = Script(_asset("study.js"))
    html = render(
        _asset("study.html.j2"),
        policy=study_policy(script),
        style=_asset("study.css"),
        title=title,
        kind=data["kind"],
        instructions=instructions,
        data=data,
        script=script,
    )
    return write_text_atomic(out / name, html)


def _prepare_out(out: Path, force: bool) -> None:
    if (out / KEY).exists() and not force:
        raise HumanStudyError(
            f"{out} already holds a study ({KEY}); its answers can only be scored with that key: "
            "choose another --out, or pass --force to replace it"
        )
    out.mkdir(parents=True, exist_ok=True)


def _labelled(values: Sequence[str], what: str) -> list[tuple[str, Path]]:
    """``LABEL=PATH`` or ``PATH`` (labelled by its folder name) pairs; labels must differ."""
    pairs = []
    for value in values:
        label, sep, path = value.partition("=")
        if not sep:
            label, path = Path(value).name, value
        if not label or not path:
            raise HumanStudyError(f"{what} {value!r}: give DIR or LABEL=DIR")
        if not LABEL.fullmatch(label):  # a label names a folder of scores and a column of tables
            raise HumanStudyError(f"{what} label {label!r}: use letters, digits, . _ - (LABEL=DIR)")
        pairs.append((label, Path(path)))
    labels = [label for label, _ in pairs]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise HumanStudyError(f"{what}s share the label {', '.join(twice)}; name them apart with LABEL=DIR")
    return pairs


# --- BVB: rank reconstructions ------------------------------------------------------------------


def _source_clip(videos: Path, datasets: dict[str, str], scene: str) -> Path | None:
    dataset = datasets.get(scene)
    if dataset and (videos / dataset / f"{scene}.mp4").is_file():
        return videos / dataset / f"{scene}.mp4"
    found = sorted(videos.glob(f"*/{scene}.mp4"))
    return found[0] if found else None


def _sources(options: BVBPackOptions, first_run: Path) -> tuple[Path, dict[str, str]]:
    config = RunDir(first_run).read_config()
    videos = options.videos or (Path(config["videos"]) if config.get("videos") else None)
    if videos is None or not videos.is_dir():
        raise HumanStudyError(
            f"source videos root {videos} not found; pass --videos DIR (the folder of <dataset>/<scene>.mp4)"
        )
    split = options.split or (Path(config["split"]) if config.get("split") else None)
    datasets = {q.scene_name: q.dataset for q in read_split(split)} if split and split.is_file() else {}
    return videos, datasets


def pack_bvb(options: BVBPackOptions) -> dict[str, Any]:
    """Build a BVB ranking study in ``options.out``; returns the key written beside the page."""
    runs = _labelled(options.runs, "run")
    if len(runs) < 2:
        raise HumanStudyError("a ranking study needs at least two runs; pass --runs DIR DIR ...")
    for label, run in runs:
        if not run.is_dir():
            raise HumanStudyError(f"run {run} ({label}) not found; pass run directories (results/<run>)")
        if not RunDir(run).renders.is_dir():
            raise HumanStudyError(f"run {run} has no camera_renders/; render it first with bvb render --run {run}")
    videos, datasets = _sources(options, runs[0][1])
    rng = random.Random(options.seed)

    def rendered(run: Path, scene: str) -> bool:
        return RunDir(run).render(scene).is_file()

    if options.scenes:
        scenes = list(options.scenes)
        for scene in scenes:
            for label, run in runs:
                if not rendered(run, scene):
                    raise HumanStudyError(
                        f"run {run} ({label}) has no render of scene {scene} ({RunDir(run).render(scene)}); "
                        "render it or leave the scene out of --scenes"
                    )
            if _source_clip(videos, datasets, scene) is None:
                raise HumanStudyError(f"no source clip of scene {scene} under {videos}; pass --videos DIR")
    else:
        common = sorted(p.stem for p in RunDir(runs[0][1]).renders.glob("*.mp4"))
        common = [s for s in common if all(rendered(run, s) for _, run in runs[1:])]
        common = [s for s in common if _source_clip(videos, datasets, s) is not None]
        if not common:
            raise HumanStudyError(
                f"no scene has a render in every run and a source clip under {videos}; "
                "render the runs (bvb render) or pass --videos DIR"
            )
        scenes = sorted(rng.sample(common, min(options.count, len(common))))
        if len(common) < options.count:
            log.warning(
                "--count %d: only %d scene(s) have a render in every run and a source clip (%s); the study holds "
                "those. Render the runs' other scenes (bvb render) for more", options.count, len(common),
                ", ".join(common),
            )  # fmt: skip
    rng.shuffle(scenes)  # the order raters see: not the scene ids' order
    if options.per_form is not None and options.per_form > len(scenes):
        raise HumanStudyError(
            f"--per-form {options.per_form} is more than the {len(scenes)} scenes drawn; raise --count"
        )

    _prepare_out(options.out, options.force)
    key = new_key("bvb", BVB_INSTRUMENT, options.seed)
    key["models"] = [{"label": label, "run": str(run.resolve())} for label, run in runs]
    key["scenes"] = {}
    letters = list(string.ascii_uppercase[: len(runs)])
    items = []
    bar = progress_bar(len(scenes) * (len(runs) + 1), desc="human pack", unit="clip")

    def shrunk(path: Path) -> str:
        uri = clip_data_uri(path, options.clips)
        bar.update()
        return uri

    for scene in scenes:
        codes = letters[:]
        rng.shuffle(codes)
        by_code = dict(zip(codes, runs, strict=True))
        source = _source_clip(videos, datasets, scene)
        assert source is not None  # checked above
        dataset = datasets.get(scene) or source.parent.name
        key["scenes"][scene] = {
            "dataset": dataset,
            "source": str(source.resolve()),
            "codes": {code: label for code, (label, _) in sorted(by_code.items())},
        }
        items.append(
            {
                "scene_id": scene,
                "source": dataset,
                "reference": shrunk(source),
                "candidates": [
                    {"code": code, "video": shrunk(RunDir(run).render(scene))}
                    for code, (_, run) in sorted(by_code.items())
                ],
            }
        )
    bar.close()
    language = options.language if options.language in ("en", "zh") else "en"
    key["forms"] = {}
    for form, chosen in enumerate(_forms(key["scenes"], scenes, options, rng), 1):
        form_id, page = (
            (key["pack_id"], PAGE)
            if options.forms == 1
            else (f"{key['pack_id']}-r{form:02d}", f"study-r{form:02d}.html")
        )
        key["forms"][form_id] = {"page": page, "scenes": chosen}
        data = {
            "kind": "bvb",
            "instrument_id": BVB_INSTRUMENT,
            "pack_id": form_id,
            "items": [item for item in items if item["scene_id"] in chosen],
        }
        write_page(options.out, data, "BVB: rank the reconstructions", _asset(f"bvb_rank_{language}.txt"), page)
    write_json_atomic(options.out / KEY, key)
    return key


def _forms(
    scenes_key: dict[str, dict], scenes: list[str], options: BVBPackOptions, rng: random.Random
) -> list[list[str]]:
    """Each form's scenes, in the pack's order: ``per_form`` drawn evenly across datasets (all, with one form)."""
    per_form = min(options.per_form or len(scenes), len(scenes))  # pack_bvb refused more
    if per_form == len(scenes):
        return [list(scenes)] * options.forms
    by_dataset: dict[str, list[str]] = {}
    for scene in scenes:
        by_dataset.setdefault(scenes_key[scene]["dataset"], []).append(scene)
    forms = []
    for _ in range(options.forms):
        pools = {name: rng.sample(group, len(group)) for name, group in sorted(by_dataset.items())}
        chosen: list[str] = []
        while len(chosen) < per_form:  # one from each dataset in turn, a random dataset order each round
            for name in rng.sample(sorted(pools), len(pools)):
                if pools[name] and len(chosen) < per_form:
                    chosen.append(pools[name].pop())
        forms.append([scene for scene in scenes if scene in chosen])
    return forms


# --- VGI: rate generated videos -----------------------------------------------------------------

VGI_INSTRUCTIONS = (
    "Each item is a video made by a video generator from the start image and the task under it. "
    "Watch the whole video. Say whether it completes the task (complete, partial or failed, by the "
    "completion criteria), and for each rule how many separate times the video breaks it (0 when never). "
    "Judge what the video shows, not how good it looks."
)


def _task_image(task: dict, tasks_file: Path) -> Path | None:
    name = task.get("start_image") or task.get("image")
    if not name:
        return None
    path = Path(name)
    path = path if path.is_absolute() else tasks_file.parent / path
    if not path.is_file():
        raise HumanStudyError(f"task {task['id']}: start image {path} not found; fix its start_image field")
    return path


def pack_vgi(options: VGIPackOptions) -> dict[str, Any]:
    """Build a VGI rating study in ``options.out``; returns the key written beside the page."""
    tasks = {task["id"]: task for task in read_tasks(options.tasks)}
    generators = _labelled(options.generators, "generator")
    rows = dict(_labelled(options.rows, "rows")) if options.rows else {}
    for label, folder in generators:
        if not folder.is_dir():
            raise HumanStudyError(f"generator {label}: videos folder {folder} not found; pass --videos LABEL=DIR")
    unknown = sorted(set(rows) - {label for label, _ in generators})
    if unknown:
        raise HumanStudyError(f"--rows names {', '.join(unknown)}, which no --videos LABEL=DIR names")
    if options.instances:
        missing = [i for i in options.instances if i not in tasks]
        if missing:
            raise HumanStudyError(f"--instances {', '.join(missing)}: not in {options.tasks}; use ids from its rows")
        chosen = list(options.instances)
    else:
        chosen = sorted(tasks)
    rng = random.Random(options.seed)
    if options.count is not None and not options.instances:
        if len(chosen) < options.count:
            log.warning("--count %d: %s holds only %d instance(s); the study holds those", options.count,
                        options.tasks, len(chosen))  # fmt: skip
        chosen = sorted(rng.sample(chosen, min(options.count, len(chosen))))

    pairs = []
    for instance in chosen:
        for label, folder in generators:
            clip = folder / f"{instance}.mp4"
            if clip.is_file():
                pairs.append((instance, label, clip))
            else:  # a missing video scores 0 by the benchmark; there is nothing for a person to rate
                log.warning("generator %s has no video of %s (%s): left out of the study", label, instance, clip)
    if not pairs:
        raise HumanStudyError("no instance has a video in any --videos folder (<folder>/<instance id>.mp4)")
    rng.shuffle(pairs)
    images = {instance: _task_image(tasks[instance], options.tasks) for instance, _, _ in pairs}

    _prepare_out(options.out, options.force)
    key = new_key("vgi", VGI_INSTRUMENT, options.seed)
    key["tasks"] = str(options.tasks.resolve())
    key["generators"] = [
        {"label": label, "videos": str(folder.resolve()), "rows": judge_rows(label, rows.get(label), options.scores)}
        for label, folder in generators
    ]
    instance_codes = {instance: f"T{n:02d}" for n, instance in enumerate(sorted({i for i, _, _ in pairs}), 1)}
    key["instances"] = {
        code: {"id": instance, "rules": [rule["id"] for rule in tasks[instance]["rubric"]]}
        for instance, code in instance_codes.items()
    }
    key["items"] = {}
    instances_data = {}
    for instance, code in instance_codes.items():
        task = tasks[instance]
        image = images[instance]
        instances_data[code] = {
            "constraint": task["constraint"],
            "criteria": list(task.get("completeness") or []),
            "rules": [{"id": rule["id"], "rule": rule["rule"]} for rule in task["rubric"]],
            "image": image_data_uri(image) if image else None,
        }
    items = []
    bar = progress_bar(len(pairs), desc="human pack", unit="clip")
    for number, (instance, label, clip) in enumerate(pairs, 1):
        code = f"V{number:02d}"
        key["items"][code] = {"instance": instance, "generator": label}
        items.append({"code": code, "instance": instance_codes[instance], "video": clip_data_uri(clip, options.clips)})
        bar.update()
    bar.close()
    data = {
        "kind": "vgi",
        "instrument_id": VGI_INSTRUMENT,
        "pack_id": key["pack_id"],
        "instances": instances_data,
        "items": items,
    }
    write_page(options.out, data, "VGI: rate the generated videos", VGI_INSTRUCTIONS)
    write_json_atomic(options.out / KEY, key)
    return key
