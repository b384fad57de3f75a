"""A bash block's result as BVB's release reports it (bvb_addon/sandbox/block_result.py), without a sandbox.

The expectations are facts of the release's ``Sandbox.exec`` (``subprocess.run(..., text=True,
capture_output=True, timeout=t)``, then ``ExecResult(124, exc.stdout or "", f"command timed out after
{timeout}s")``) and of Python's subprocess, written out as literals.
"""

import os
import subprocess
import sys

import pytest

from bvb_addon.sandbox.block_result import Capture, bash_result, decode, wait_exit

pytestmark = pytest.mark.unit


def test_a_timeout_is_124_with_the_release_text_replacing_stderr():
    result = bash_result(0, True, 300.0, b"", b"ignored", 300.2)
    assert (result.returncode, result.stdout, result.stderr) == (124, "", "command timed out after 300.0s")
    assert result.partial_stdout is None and result.timed_out
    # An int timeout is the release's float (argparse type=float): 2 shows as 2.0.
    assert bash_result(0, True, 2, b"", b"", 2.0).stderr == "command timed out after 2.0s"
    assert bash_result(0, True, 0.5, b"", b"", 0.5).stderr == "command timed out after 0.5s"


def test_a_timeout_shows_the_captured_stdout_as_the_release_prints_its_bytes():
    result = bash_result(0, True, 1.0, b"start\r\nd\xc3\xa9j\xc3\xa0\n", b"", 1.0)
    assert result.stdout == "b'start\\r\\nd\\xc3\\xa9j\\xc3\\xa0\\n'" == str(b"start\r\nd\xc3\xa9j\xc3\xa0\n")
    assert result.partial_stdout == b"start\r\nd\xc3\xa9j\xc3\xa0\n"


def test_python_gives_a_timeout_s_output_as_bytes_even_with_text():
    # The fact the release's quirk rests on, checked against this Python.
    code = "import sys, time; sys.stdout.write('start\\n'); sys.stdout.flush(); time.sleep(30)"
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, timeout=1.5)
    assert caught.value.stdout == b"start\n"


def test_output_is_decoded_as_text_mode_reads_it():
    assert decode(b"a\r\nb\rc\n") == ("a\nb\nc\n", None)
    text, error = decode(b"ok \xff!")
    assert text == "ok \ufffd!"
    assert error == "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 3: invalid start byte"
    result = bash_result(3, False, 300.0, b"out\r\n", b"\xfe", 0.1)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "\ufffd")
    assert result.decode_error.startswith("UnicodeDecodeError: 'utf-8' codec can't decode byte 0xfe")


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"short", b"short"),
        (b"x" * 20, b"x" * 20),
        (b"0123456789abcdefghij" * 3 + b"END", b"0123456789\n[... 43 bytes not kept ...]\ndefghijEND"),
    ],
)
def test_a_stream_keeps_its_head_and_tail(data, expected):
    read, write = os.pipe()
    capture = Capture(os.fdopen(read, "rb"), keep=10)
    for start in range(0, len(data), 7):
        os.write(write, data[start : start + 7])
    os.close(write)
    capture.thread.join(timeout=5)
    assert capture.data() == expected


def test_wait_exit_returns_at_the_exit_and_says_when_it_timed_out():
    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    assert wait_exit(quick, 30) is True
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert wait_exit(slow, 0.2) is False
    finally:
        slow.kill()
        slow.wait()
