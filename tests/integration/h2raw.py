"""A raw HTTP/2 client for transport tests: frames built and read by hand,
so a test can do what no well-behaved client does (send garbage, never read,
open no flow-control window) and see exactly what the server sends.

Header blocks are sent as HPACK literals; received ones are not decoded
(nghttp2 Huffman-codes most strings), except that has_grpc_status()
recognises grpc-status in a stream's first trailers.
"""

import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS = 0x1, 0x4
# Error codes (RFC 9113 §7).
NO_ERROR, INTERNAL_ERROR, CANCEL, ENHANCE_YOUR_CALM = 0x0, 0x2, 0x8, 0xb


def frame(ftype, flags, stream, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, ftype, flags, stream) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(headers):
    """A header block of literals without indexing and without Huffman:
    enough for a request, no table state needed."""
    out = b""
    for name, value in headers:
        name, value = name.encode(), value.encode()
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return out


def grpc_request(path, msg, content_type="application/grpc", stream=1,
                 whole=True):
    """The frames of a request; only its HEADERS unless |whole|."""
    body = msg.SerializeToString()
    hdrs = hpack_literal([(":method", "POST"), (":scheme", "http"),
                          (":path", path), (":authority", "localhost"),
                          ("content-type", content_type), ("te", "trailers")])
    out = frame(HEADERS, END_HEADERS, stream, hdrs)
    if whole:
        out += frame(DATA, END_STREAM, stream,
                     struct.pack(">BI", 0, len(body)) + body)
    return out


def raw_connect(addr, rcvbuf=None):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        # A small fixed buffer (no autotuning): the kernel holds little of
        # what the server sends, so the server itself has to hold back.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((host, int(port)))
    return s


def read_frames(s, until, timeout=10):
    """Reads frames until until(frames) is true or the peer closes; returns
    (frames, closed). Each frame is (type, flags, stream, payload)."""
    buf, frames = b"", []
    deadline = time.monotonic() + timeout
    while not until(frames):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("frames so far: %r" % [f[:3] for f in frames])
        s.settimeout(left)
        chunk = s.recv(65536)
        if not chunk:
            return frames, True
        buf += chunk
        while len(buf) >= 9:
            n = buf[0] << 16 | buf[1] << 8 | buf[2]
            if len(buf) < 9 + n:
                break
            ftype, flags = buf[3], buf[4]
            stream = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
            frames.append((ftype, flags, stream, buf[9:9 + n]))
            buf = buf[9 + n:]
    return frames, False


def read_until_closed(s, timeout=10):
    """The frames the peer sent on |s| before it closed the connection
    (EOF, or a reset: a peer that closes with our bytes unread resets it,
    and what it sent before is still read). Raises TimeoutError if it is
    still open after |timeout| seconds."""
    buf, frames = b"", []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("still open; frames so far: %r" %
                               [f[:3] for f in frames])
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        except socket.timeout:
            continue
        if not chunk:
            return frames
        buf += chunk
        while len(buf) >= 9:
            n = buf[0] << 16 | buf[1] << 8 | buf[2]
            if len(buf) < 9 + n:
                break
            stream = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
            frames.append((buf[3], buf[4], stream, buf[9:9 + n]))
            buf = buf[9 + n:]


def goaway_error(frames):
    """The error code of the first GOAWAY among |frames|, or None."""
    for f in frames:
        if f[0] == GOAWAY:
            return struct.unpack(">I", f[3][4:8])[0]
    return None


def wait_closed(s, timeout=10):
    """True once the peer has closed |s| (EOF or reset) within |timeout|."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if s.recv(65536) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            break
    return False


def h2_open(addr, settings=b""):
    """A raw HTTP/2 connection past the SETTINGS exchange."""
    s = raw_connect(addr)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, settings))
    frames, closed = read_frames(
        s, lambda fs: any(f[0] == SETTINGS and not f[1] & 1 for f in fs))
    assert not closed
    s.sendall(frame(SETTINGS, 1, 0))
    return s


# "grpc-status" as nghttp2 sends it the first time on a connection: a new
# name, Huffman-coded by RFC 7541's static code. Its value is a literal
# (Huffman-coding one or two digits saves nothing).
GRPC_STATUS_NAME = b"\x9a\xca\xc8\xb2\x12\x34\xda\x8f"


def has_grpc_status(block, code):
    """Whether header block |block| says grpc-status |code|."""
    value = str(code).encode()
    return GRPC_STATUS_NAME + bytes([len(value)]) + value in block
