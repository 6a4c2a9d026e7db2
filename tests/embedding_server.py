"""A small deterministic OpenAI-compatible embeddings server, run as a real process by tests (``running_server``).

``POST /v1/embeddings`` with ``{"model", "input": [...]}`` answers ``{"data": [{"embedding", "index"}], ...}``;
``GET /health`` answers 200; ``GET /requests`` answers the request bodies received so far (a test reads what was
sent). A vector is the normalized sum, over a text's words, of one hashed direction per *concept*: words of one
concept (``car``, ``automobile``, ``vehicle``) share a direction, so a paraphrase lands near its original.

Options make it misbehave on purpose: ``--delay`` seconds before each answer, ``--malformed`` KIND (``json``: not
JSON; ``dimension``: one number short; ``nan``: a NaN; ``huge``: an integer beyond any float; ``text``: a number as a
string; ``count``: one item short; ``index``: an index twice; ``status``: HTTP 500; ``list``: the items without
the object around them). ``--drip`` sends the reply a byte at a time, that many seconds apart. ``--trickle``
``headers`` sends the status line and an endless header that way, ``chunked`` a chunked reply's endless size line:
each byte inside any per-read timeout, the reply never done. ``--tls CERT KEY`` serves HTTPS with that certificate
(``self_signed_certificate`` makes one for the loopback address).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import ipaddress
import json
import math
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DIMENSION = 64
CONCEPTS = {
    "car": "vehicle",
    "cars": "vehicle",
    "automobile": "vehicle",
    "vehicle": "vehicle",
    "dog": "canine",
    "dogs": "canine",
    "puppy": "canine",
    "hound": "canine",
    "physician": "doctor",
    "doctor": "doctor",
    "purchased": "buy",
    "bought": "buy",
    "buy": "buy",
}
STOP_WORDS = {"a", "an", "the", "my", "i", "of", "to", "new", "query", "passage"}
MALFORMED = ("json", "dimension", "nan", "huge", "text", "count", "index", "status", "list")
TRICKLES = ("headers", "chunked")


def embed(text: str, dimension: int = DIMENSION) -> list[float]:
    """The deterministic vector of ``text``."""
    vector = [0.0] * dimension
    for word in re.findall(r"\w+", text.lower()):
        if word in STOP_WORDS:
            continue
        digest = hashlib.sha256(CONCEPTS.get(word, word).encode()).digest()
        for position in range(4):
            slot = digest[2 * position] % dimension
            vector[slot] += 1.0 if digest[2 * position + 1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def reply(inputs: list[str], *, dimension: int, malformed: str | None) -> list[dict]:
    data = [{"object": "embedding", "index": i, "embedding": embed(text, dimension)} for i, text in enumerate(inputs)]
    if malformed == "dimension":
        data[0]["embedding"] = data[0]["embedding"][:-1]
    elif malformed == "nan":
        data[0]["embedding"][0] = math.nan
    elif malformed == "huge":
        data[0]["embedding"][0] = 10**400
    elif malformed == "text":
        data[0]["embedding"][0] = "0.5"
    elif malformed == "count":
        data = data[:-1]
    elif malformed == "index" and len(data) > 1:
        data[1]["index"] = 0
    return data


def serve(
    port: int,
    *,
    dimension: int,
    delay: float,
    drip: float,
    malformed: str | None,
    trickle: str | None,
    tls: tuple[str, str] | None = None,
) -> None:
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: bytes, *, dripping: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not dripping:
                return self.wfile.write(body)
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(drip)

        def _trickle(self) -> None:
            if trickle == "headers":
                head, endless = b"HTTP/1.1 200 OK\r\nX-Padding: ", b"a"
            else:
                head, endless = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"0"
            self.wfile.write(head)
            self.wfile.flush()
            while True:  # until the client hangs up (a write then fails)
                self.wfile.write(endless)
                self.wfile.flush()
                time.sleep(drip)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, b'{"status":"ok"}')
            elif self.path == "/requests":
                self._send(200, json.dumps(received).encode())
            else:
                self._send(404, b'{"error":"not found"}')

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            received.append({**request, "authorization": self.headers.get("Authorization")})
            if self.path != "/v1/embeddings":
                return self._send(404, b'{"error":"not found"}')
            time.sleep(delay)
            if trickle:
                return self._trickle()
            if malformed == "status":
                return self._send(500, b'{"error":"broken"}')
            if malformed == "json":
                return self._send(200, b'{"data": [{"embedding": [0.1, ')
            data = reply(request["input"], dimension=dimension, malformed=malformed)
            body = {"object": "list", "model": request.get("model"), "data": data}
            if malformed == "list":
                body = data
            self._send(200, json.dumps(body).encode(), dripping=drip > 0)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, valid for a day: ``(certificate file, key file)``, PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "embeddings test server")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate_file, key_file = directory / "embeddings-cert.pem", directory / "embeddings-key.pem"
    certificate_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certificate_file, key_file


@contextlib.contextmanager
def running_server(*options: str, timeout: float = 30.0, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Starts this module as a process on a free loopback port; yields its base URL (``http://127.0.0.1:P/v1``, or
    ``https://`` with ``tls``: a certificate and key file) once ``/health`` answers, and stops the process
    afterwards."""
    if tls is not None:
        options = (*options, "--tls", str(tls[0]), str(tls[1]))
    scheme = "http" if tls is None else "https"
    context = None if tls is None else ssl.create_default_context(cafile=str(tls[0]))
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--port", "0", *options],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(process.stdout.readline())  # the server prints its port once it is bound
        deadline = time.monotonic() + timeout
        while True:
            try:
                health = f"{scheme}://127.0.0.1:{port}/health"
                with urllib.request.urlopen(health, timeout=5, context=context) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"{scheme}://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()


def requests_received(base_url: str) -> list[dict]:
    """The request bodies the server at ``base_url`` has received (with each one's Authorization header)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/requests", timeout=5) as response:
        return json.loads(response.read())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dimension", type=int, default=DIMENSION)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--drip", type=float, default=0.0)
    parser.add_argument("--malformed", choices=MALFORMED, default=None)
    parser.add_argument("--trickle", choices=TRICKLES, default=None)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None)
    arguments = parser.parse_args()
    options = {
        "delay": arguments.delay,
        "drip": arguments.drip,
        "malformed": arguments.malformed,
        "trickle": arguments.trickle,
        "tls": tuple(arguments.tls) if arguments.tls else None,
    }
    serve(arguments.port, dimension=arguments.dimension, **options)
