"""Concurrent health checks against the scoring service, one burst of N clients at once.

    .venv/bin/python bench/bridge_health.py [--clients 200] [--rounds 3]

Each round starts N clients together (a barrier), each on its own connection. Printed side by
side: answered 200 of N, and the latency quantiles relative to one lone health check measured
in the same run. The last line is ``answered=<a>/<n> p50_ratio=<x> max_ratio=<y>``.
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eval_bridge.service.app import BridgeServer, ServiceConfig  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        config = ServiceConfig(roots=(tmp,), port=0, token="bench")
        headers = {"Authorization": "Bearer bench"}
        with BridgeServer(config) as server:
            url = f"{server.url}/health"
            lone = []
            for _ in range(20):
                began = time.perf_counter()
                requests.get(url, headers=headers, timeout=30)
                lone.append(time.perf_counter() - began)
            alone = statistics.median(lone)
            answered, latencies = 0, []
            for _ in range(args.rounds):
                barrier = threading.Barrier(args.clients)

                def check(_i, barrier=barrier):
                    session = requests.Session()
                    barrier.wait()
                    began = time.perf_counter()
                    try:
                        status = session.get(url, headers=headers, timeout=30).status_code
                    except requests.RequestException:
                        status = None
                    return status, time.perf_counter() - began

                with ThreadPoolExecutor(max_workers=args.clients) as pool:
                    results = list(pool.map(check, range(args.clients)))
                answered += sum(status == 200 for status, _ in results)
                latencies += [elapsed for _, elapsed in results]
    total = args.clients * args.rounds
    p50, worst = statistics.median(latencies), max(latencies)
    print(f"lone health check: {1000 * alone:.1f} ms (median of 20)")
    print(f"{args.clients} at once x {args.rounds}: {answered}/{total} answered 200; "
          f"p50 {1000 * p50:.1f} ms, max {1000 * worst:.1f} ms")  # fmt: skip
    print(f"answered={answered}/{total} p50_ratio={p50 / alone:.1f} max_ratio={worst / alone:.1f}")
    return 0 if answered == total else 1


if __name__ == "__main__":
    sys.exit(main())
