"""The bpy-free parts of the sandbox: frames from an untrusted peer, sizes, configuration."""

import socket
import struct

import pytest

from bvb_addon.sandbox import SandboxConfig, frame_size, replies, wire
from bvb_addon.sandbox.worker import _text

pytestmark = pytest.mark.unit


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_round_trip(pair):
    a, b = pair
    wire.send_msg(a, {"id": 3, "text": "é" * 10})
    assert wire.recv_msg(b, 1024, timeout=1) == {"id": 3, "text": "é" * 10}


def test_a_lone_surrogate_crosses_as_its_json_escape(pair):
    """Agent code or its output may hold one; it has no UTF-8 bytes, so that frame goes as ASCII JSON."""
    a, b = pair
    message = {"program": "x = '\ud800'", "text": "é\udc80"}
    wire.send_msg(a, message)
    assert wire.recv_msg(b, 1024, timeout=1) == message


def test_oversize_frame_is_refused_before_reading_it(pair):
    a, b = pair
    a.sendall(struct.pack(">I", 1 << 30))
    with pytest.raises(wire.ProtocolError, match="exceeds"):
        wire.recv_msg(b, 1 << 20, timeout=1)


@pytest.mark.parametrize("payload", [b"\xff\xfe not utf-8", b"{not json", b"[1, 2]"])
def test_malformed_frames_are_protocol_errors(pair, payload):
    a, b = pair
    a.sendall(struct.pack(">I", len(payload)) + payload)
    with pytest.raises(wire.ProtocolError):
        wire.recv_msg(b, 1024, timeout=1)


def test_half_frame_times_out_and_closed_peer_is_reported(pair):
    a, b = pair
    a.sendall(struct.pack(">I", 100) + b"{")
    with pytest.raises(wire.PeerTimeout):
        wire.recv_msg(b, 1024, timeout=0.2)
    a.close()
    with pytest.raises(wire.PeerClosed):
        wire.recv_msg(b, 1024, timeout=1)


def test_untrusted_strings_are_capped_and_summaries_validated():
    assert _text("x" * 50, 10).startswith("x" * 10) and "40 more characters" in _text("x" * 50, 10)
    assert _text(["not", "text"], 10) == ""
    good = replies.validate(replies.RunReply, {"id": 1, "status": "error", "summary": {"error": "the scene broke"}})
    assert good.summary.error == "the scene broke"
    for summary in ("nope", {"a": "b" * 100}, {"error": "b" * 5000}):
        with pytest.raises(replies.ReplyInvalid, match="summary"):
            replies.validate(replies.RunReply, {"id": 1, "status": "error", "summary": summary})


def test_frame_size_is_even_with_the_longest_side_given():
    assert frame_size(512, 4 / 3) == (512, 384)
    assert frame_size(512, 16 / 9) == (512, 288)
    assert frame_size(512, 9 / 16) == (288, 512)
    assert frame_size(101, 1.0) == (100, 100)  # H.264 needs even sizes
    with pytest.raises(ValueError):
        frame_size(512, 0)


def test_config_rejects_unknown_level():
    with pytest.raises(ValueError, match="min_level"):
        SandboxConfig(min_level="docker")
