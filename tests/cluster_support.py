"""A real multi-node Ray cluster on one machine: hosts made of network namespaces the test creates.

    with NetnsCluster(hosts=3) as cluster:
        cluster.run(0, [python, "-m", "headless.cli", "run", ..., "--ray-address", cluster.address])

Host 0 holds a bridge; a veth pair joins each other host to it. Addresses (10.231.0.0/24) exist
only on the veths and bridge inside these namespaces, so traffic never leaves them. Host 0 runs
the Ray head (``RAY_AUTH_MODE=token``, every node reading the token file the test wrote), the
others run worker nodes; each node has its own Ray temp dir under the test's folder and the
same checkout on PYTHONPATH (the results folder is one directory, as shared storage would be).
Teardown kills the processes by the PIDs this class started and by the namespaces it created
(a process in one of them was started here), then deletes the namespaces. Never by name.
"""

import atexit
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUBNET = "10.231.0"
PORT = 6390
CLONE_NEWNET = 0x40000000
RAY_ENV = {
    # Lost nodes are noticed in a few seconds rather than the default half minute.
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def netns_available():
    """None when root can make network namespaces here, else why not (a skip reason)."""
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    name = f"bvbprobe{os.getpid()}"
    try:
        made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"ip netns unavailable: {exc}"
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)
    return None


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=20)


def _net_inode(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _children():
    """{ppid: [pid]} of every process now."""
    tree = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid):
    """``pid`` and every process below it, now."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(tree.get(current, ()))
    return out


class NetnsCluster:
    def __init__(self, hosts=3, cpus=1, root=None, python=sys.executable):
        self.hosts = hosts
        self.cpus = cpus
        self.python = python
        self.ray = str(Path(python).with_name("ray"))
        self.tag = f"bvbc{os.getpid()}"
        self.names = [f"{self.tag}h{i}" for i in range(hosts)]
        self.made = []
        self.own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="bvbc", dir="/tmp"))  # short: Ray's socket paths
        self.token = self.root / "auth_token"
        self.nodes = {}  # host index -> Popen of `ray start --block`
        self.logs, self.log_from = {}, {}  # host index -> its log, and where its latest start's lines begin
        self.address = f"{self.ip(0)}:{PORT}"

    def ip(self, host):
        return f"{SUBNET}.{host + 1}"

    # -- the network ------------------------------------------------------------------------

    def _network(self):
        for name in self.names:
            _ip("netns", "add", name)
            self.made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        head = self.names[0]
        _ip("-n", head, "link", "add", "br0", "type", "bridge")
        _ip("-n", head, "addr", "add", f"{self.ip(0)}/24", "dev", "br0")
        _ip("-n", head, "link", "set", "br0", "up")
        for i, name in enumerate(self.names[1:], 1):
            # Both ends are created inside the namespaces: nothing appears in the host's.
            _ip("-n", head, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("-n", head, "link", "set", f"v{i}", "master", "br0", "up")
            _ip("-n", name, "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(RAY_ENV)
        env.update(
            RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token), PYTHONPATH=str(REPO), HOME=str(self.root)
        )
        env.update(extra)
        return env

    def popen(self, host, argv, log=None, errors=None, **extra_env):
        """Start argv inside host's namespace (``ip netns exec`` execs it: the PID is the command's).

        stdout goes to log; stderr too, or to errors when given (Ray's driver prints node deaths to
        stderr at any time, so the last line of stdout is the one a stage ends with)."""
        out = open(log, "ab") if log else subprocess.DEVNULL
        err = open(errors, "ab") if errors else subprocess.STDOUT
        return subprocess.Popen(
            ["ip", "netns", "exec", self.names[host], *map(str, argv)], env=self.env(**extra_env), stdout=out,
            stderr=err, cwd=REPO, start_new_session=True,
        )  # fmt: skip

    def run(self, host, argv, timeout=600, **extra_env):
        """Run argv to its end inside host's namespace; a CompletedProcess with its output."""
        return subprocess.run(
            ["ip", "netns", "exec", self.names[host], *map(str, argv)], env=self.env(**extra_env), cwd=REPO,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    # -- Ray ----------------------------------------------------------------------------------

    def _start_node(self, host):
        self.logs[host] = self.root / f"node{host}.log"
        start = self.logs[host].stat().st_size if self.logs[host].is_file() else 0
        self.log_from[host] = start
        argv = [self.ray, "start", "--block", "--node-ip-address", self.ip(host), "--num-cpus", self.cpus,
                "--temp-dir", self.root / f"ray{host}", "--disable-usage-stats", "--object-store-memory", 100 * 2**20]  # fmt: skip
        if host == 0:
            argv += ["--head", "--port", PORT, "--include-dashboard=false"]
        else:
            argv += ["--address", self.address]
        # Unbuffered: the log says "Ray runtime started." the moment it is (the start is waited on by it).
        self.nodes[host] = self.popen(host, argv, log=self.logs[host], PYTHONUNBUFFERED="1")

    def _wait_started(self, hosts, timeout=120):
        """Wait until each host's `ray start` has printed that its node runs (read from its log, no probe)."""
        deadline = time.monotonic() + timeout
        waiting = set(hosts)
        while waiting:
            for host in list(waiting):
                with open(self.logs[host], "rb") as handle:
                    handle.seek(self.log_from[host])
                    if b"Ray runtime started." in handle.read():
                        waiting.discard(host)
                    elif self.nodes[host].poll() is not None:
                        raise RuntimeError(f"ray start on host {host} exited: see {self.logs[host]}")
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(f"hosts {sorted(waiting)} did not start Ray; see {self.root}/node*.log")
            if waiting:
                time.sleep(0.1)

    def alive_nodes(self):
        """{node ip: alive} as the head sees it (a driver run in host 0); a restarted host is alive."""
        probe = (
            "import json, sys, ray; ray.init(address=sys.argv[1], log_to_driver=False)\n"
            "d = {}\nfor n in ray.nodes(): d[n['NodeManagerAddress']] = d.get(n['NodeManagerAddress']) or n['Alive']\n"
            "print(json.dumps(d))"
        )
        done = self.run(0, [self.python, "-c", probe, self.address], timeout=120)
        if done.returncode != 0:
            return {}
        import json

        return json.loads(done.stdout.strip().splitlines()[-1])

    def wait_for(self, alive, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nodes = self.alive_nodes()
            if {ip for ip, up in nodes.items() if up} == set(alive):
                return nodes
            time.sleep(1)
        raise TimeoutError(f"Ray nodes alive: {self.alive_nodes()}, wanted {sorted(alive)}; see {self.root}/node*.log")

    def start(self):
        # Torn down even when the test process is interrupted before its fixtures finish.
        atexit.register(self.stop)
        self.root.mkdir(parents=True, exist_ok=True)
        self.token.write_text(secrets.token_hex(32))
        self.token.chmod(0o600)
        self._network()
        self._start_node(0)
        self._wait_started([0])
        for host in range(1, self.hosts):
            self._start_node(host)
        self._wait_started(range(1, self.hosts))
        # One probe to confirm what the logs said: every node registered with the head.
        self.wait_for([self.ip(h) for h in range(self.hosts)])
        return self

    def restart_host(self, host):
        """Start a fresh Ray node on a host whose node was killed (its namespace and address stay)."""
        self._start_node(host)
        self._wait_started([host])
        alive = {ip for ip, up in self.alive_nodes().items() if up} | {self.ip(host)}
        self.wait_for(sorted(alive))

    # -- faults and teardown --------------------------------------------------------------------

    def pids_of(self, host):
        """The processes of host: those below its node's PID and those inside its namespace."""
        pids = set()
        node = self.nodes.get(host)
        if node is not None and node.poll() is None:
            pids.update(descendants(node.pid))
        inode = os.stat(f"/run/netns/{self.names[host]}").st_ino
        pids.update(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _net_inode(p.name) == inode)
        pids.discard(os.getpid())
        return pids

    def _kill(self, pids):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def kill_host(self, host):
        """SIGKILL every Ray process of one host at once (a lost machine); returns how many."""
        pids = self.pids_of(host)
        self._kill(pids)
        if host in self.nodes:
            self.nodes[host].wait(timeout=30)
        return len(pids)

    def stop(self):
        # Every process of every host, listed before any dies (a dead parent's children would be
        # reparented out of reach of descendants()), then killed at once: the cluster is the test's
        # own, nothing in it needs a graceful stop (a SIGTERMed head took 30 s), its files are rmtree'd.
        hosts = [host for host, name in enumerate(self.names) if name in self.made]
        for _ in range(3):
            leftovers = set().union(*(self.pids_of(host) for host in hosts)) if hosts else set()
            if not leftovers:
                break
            self._kill(leftovers)
            for node in self.nodes.values():
                try:
                    node.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)
        self.made = []
        if self.own_root:
            # The folder this class made (Ray's temp dirs, logs, the token); nothing is mounted in it.
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()

    # -- a server inside a namespace ------------------------------------------------------------

    def in_host(self, host, make):
        """make() called on a thread that entered host's network namespace: sockets it opens live there.

        Only that short-lived thread changes namespace (setns acts per thread); the test's own
        threads stay where they are. Used to start the scripted OpenAI server on host 0's address.
        """
        libc = ctypes.CDLL(None, use_errno=True)
        result = {}

        def enter():
            fd = os.open(f"/run/netns/{self.names[host]}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns failed")
                result["value"] = make()
            except BaseException as exc:
                result["error"] = exc
            finally:
                os.close(fd)

        thread = threading.Thread(target=enter)
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["value"]
