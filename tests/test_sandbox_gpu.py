"""The GPU in the render sandbox: which device nodes and driver files a worker gets, as bubblewrap arguments.

No GPU here: the device nodes are plain files in tmp_path, found through gpu_paths(root).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bvb_addon.sandbox import SandboxConfig
from bvb_addon.sandbox.layers import bwrap_args, gpu_groups, gpu_paths, runtime, setpriv_args

pytestmark = pytest.mark.unit

DEVICES = ["dev/dri/card0", "dev/dri/renderD128", "dev/nvidia0", "dev/nvidia1", "dev/nvidiactl", "dev/nvidia-modeset",
           "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia-caps/nvidia-cap1", "dev/nvidia-caps/nvidia-cap2"]  # fmt: skip
# Host things a worker must not get: other devices, DRM's by-path links, the rest of sysfs.
OTHERS = ["dev/null", "dev/sda", "dev/kvm", "dev/fuse", "dev/input/event0", "sys/class/net/eth0",
          "sys/devices/virtual/net/lo", "sys/firmware/acpi", "sys/bus/usb/devices/1-1", "etc/passwd"]  # fmt: skip
DRIVER_DIRS = ["usr/share/glvnd/egl_vendor.d", "etc/glvnd/egl_vendor.d", "etc/vulkan/icd.d", "etc/OpenCL/vendors",
               "sys/dev/char", "sys/devices/pci0000:00/0000:00:02.0", "sys/devices/pci0000:80", "sys/bus/pci/devices"]  # fmt: skip


def fake_root(tmp_path, devices=DEVICES):
    root = tmp_path / "root"
    for name in [*devices, *OTHERS]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    for name in DRIVER_DIRS:
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "dev" / "dri" / "by-path").mkdir(parents=True, exist_ok=True)
    (root / "dev" / "dri" / "by-path" / "pci-0000:00:02.0-render").symlink_to("../renderD128")
    return root


def test_gpu_paths_finds_the_device_nodes_that_exist_and_nothing_else(tmp_path):
    root = fake_root(tmp_path)
    gpu = gpu_paths(root)
    assert sorted(gpu.names()) == sorted("/" + d for d in DEVICES)
    assert all(host == str(root) + inside for host, inside in gpu.devices)
    assert sorted(inside for _, inside in gpu.driver) == [
        "/etc/OpenCL", "/etc/glvnd", "/etc/vulkan", "/sys/bus/pci", "/sys/dev/char", "/sys/devices/pci0000:00",
        "/sys/devices/pci0000:80", "/usr/share/glvnd",
    ]  # fmt: skip


def test_no_device_nodes_means_no_gpu_binds_at_all(tmp_path):
    root = fake_root(tmp_path, devices=[])
    gpu = gpu_paths(root)
    assert not gpu and gpu.driver == ()
    config = SandboxConfig()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert bwrap_args(config, workspace, [], None, gpu) == bwrap_args(config, workspace, [], None, None)


def test_bwrap_args_bind_the_nodes_read_write_and_driver_files_read_only(tmp_path):
    root = fake_root(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = bwrap_args(SandboxConfig(), workspace, [], None, gpu_paths(root))
    r = str(root)
    expected = [
        # /usr/share/glvnd is inside /usr, bound already: not bound again.
        "--perms", "0755", "--dir", "/etc",
        "--ro-bind", f"{r}/etc/glvnd", "/etc/glvnd",
        "--ro-bind", f"{r}/etc/vulkan", "/etc/vulkan",
        "--ro-bind", f"{r}/etc/OpenCL", "/etc/OpenCL",
        "--perms", "0755", "--dir", "/sys", "--perms", "0755", "--dir", "/sys/dev",
        "--ro-bind", f"{r}/sys/dev/char", "/sys/dev/char",
        "--perms", "0755", "--dir", "/sys/devices",
        "--ro-bind", f"{r}/sys/devices/pci0000:00", "/sys/devices/pci0000:00",
        "--ro-bind", f"{r}/sys/devices/pci0000:80", "/sys/devices/pci0000:80",
        "--perms", "0755", "--dir", "/sys/bus",
        "--ro-bind", f"{r}/sys/bus/pci", "/sys/bus/pci",
        "--perms", "0755", "--dir", "/dev/dri",
        "--dev-bind", f"{r}/dev/dri/card0", "/dev/dri/card0",
        "--dev-bind", f"{r}/dev/dri/renderD128", "/dev/dri/renderD128",
        "--dev-bind", f"{r}/dev/nvidia-modeset", "/dev/nvidia-modeset",
        "--dev-bind", f"{r}/dev/nvidia-uvm", "/dev/nvidia-uvm",
        "--dev-bind", f"{r}/dev/nvidia-uvm-tools", "/dev/nvidia-uvm-tools",
        "--dev-bind", f"{r}/dev/nvidia0", "/dev/nvidia0",
        "--dev-bind", f"{r}/dev/nvidia1", "/dev/nvidia1",
        "--dev-bind", f"{r}/dev/nvidiactl", "/dev/nvidiactl",
        "--perms", "0755", "--dir", "/dev/nvidia-caps",
        "--dev-bind", f"{r}/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap1",
        "--dev-bind", f"{r}/dev/nvidia-caps/nvidia-cap2", "/dev/nvidia-caps/nvidia-cap2",
    ]  # fmt: skip
    start = args.index("/etc", args.index("/tmp")) - 3
    assert args[start : start + len(expected)] == expected
    # The GPU binds come after bubblewrap's own minimal /dev, and before the workspace.
    assert args.index("/dev") < start and start + len(expected) <= args.index("--bind")
    # Nothing else of the host's /dev or /sys.
    bound = [args[i + 1] for i, a in enumerate(args) if a in ("--bind", "--ro-bind", "--dev-bind")]
    for other in OTHERS:
        assert not any(b.endswith("/" + other) for b in bound)
    assert not any("by-path" in a for a in args)
    assert args.count("--dev-bind") == len(DEVICES)


def test_without_the_flag_a_worker_gets_no_gpu(tmp_path):
    assert SandboxConfig().gpu is False
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = bwrap_args(SandboxConfig(), workspace, [], None)
    assert "--dev-bind" not in args and not any(a.startswith("/sys") for a in args)


def test_a_dedicated_uid_keeps_only_the_group_of_a_node_it_could_not_open(tmp_path):
    root = fake_root(tmp_path)
    render = root / "dev" / "dri" / "renderD128"
    render.chmod(0o660)
    for host, _ in gpu_paths(root).devices:
        if host != str(render):
            Path(host).chmod(0o666)
    groups = gpu_groups(gpu_paths(root))
    assert groups == (render.stat().st_gid,)
    assert f"--groups={groups[0]}" in setpriv_args(2100000, groups)
    plain = setpriv_args(2100000)
    assert "--clear-groups" in plain and not any(a.startswith("--groups") for a in plain)


def test_render_stage_workers_get_the_gpu_and_run_only_with_agent_gpu(tmp_path):
    from bvb_addon.agent.runner import resolve
    from bvb_addon.render_stage import RenderOptions, RenderStage
    from headless import run

    (tmp_path / "run" / "blends").mkdir(parents=True)
    config = SandboxConfig(min_level="rlimits", allow_below_minimum=True)
    stage = RenderStage(RenderOptions(run=tmp_path / "run", sandbox=config, progress=False))
    try:
        assert stage.sandbox.gpu is True and config.gpu is False
    finally:
        stage.close()
    parser = run.build_parser()
    base = ["--split", "s.jsonl", "--videos", "v", "--output", str(tmp_path / "out")]
    assert resolve(run.options_from(parser.parse_args(base))).sandbox.gpu is False
    assert resolve(run.options_from(parser.parse_args([*base, "--agent-gpu"]))).sandbox.gpu is True


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_bubblewrap_accepts_the_gpu_binds_and_the_worker_sees_exactly_them(tmp_path):
    """The arguments run for real: the fake nodes open read-write inside, other host devices are absent."""
    root = fake_root(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = SandboxConfig()
    _, read_paths = runtime(config, __file__, [])
    code = (
        "import json, os\n"
        "dri = sorted(os.listdir('/dev/dri'))\n"
        "with open('/dev/nvidiactl', 'r+b') as f: writable = f.writable()\n"
        "print(json.dumps({'dri': dri, 'writable': writable, 'caps': sorted(os.listdir('/dev/nvidia-caps')),"
        " 'sda': os.path.exists('/dev/sda'), 'sys': sorted(os.listdir('/sys')), 'bus': os.listdir('/sys/bus'),"
        " 'devices': sorted(os.listdir('/sys/devices')), 'vulkan': os.path.isdir('/etc/vulkan/icd.d')}))\n"
    )
    python = os.path.realpath(sys.executable)
    argv = bwrap_args(config, workspace, read_paths, None, gpu_paths(root)) + [python, "-I", "-c", code]
    proc = subprocess.run(argv, capture_output=True, timeout=60)
    if proc.returncode != 0 and b"No permissions to create new namespace" in proc.stderr:
        pytest.skip("user namespaces are not available here")
    assert proc.returncode == 0, proc.stderr.decode()
    seen = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert seen == {"dri": ["card0", "renderD128"], "writable": True, "caps": ["nvidia-cap1", "nvidia-cap2"],
                    "sda": False, "sys": ["bus", "dev", "devices"], "bus": ["pci"], "devices": ["pci0000:00", "pci0000:80"],
                    "vulkan": True}  # fmt: skip
