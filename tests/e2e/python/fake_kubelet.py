"""A kubelet-shaped HTTPS server for the pod proxy e2e tests (stdlib only).

It requires a client certificate from the given CA (as a kubelet does with
--client-ca-file) and serves:
- GET /containerLogs/<ns>/<pod>/<container>: three lines "line N of <ns>/<pod>/<container>"
  (tailLines keeps the last N); follow=true then adds "follow N" every 100 ms (bounded).
  Containers with a meaning: "query" answers the raw query it received, "whoami" the client
  certificate's subject, "gone" answers 404 and "broken" 500 as a kubelet does.
- /exec/<ns>/<pod>/<container> and /attach/...: a WebSocket upgrade with the remotecommand
  protocol v5.channel.k8s.io (each binary message starts with its stream: 0 stdin, 1 stdout,
  2 stderr, 3 error/status, 4 resize, 255 close). Commands: "echo ARGS" prints ARGS,
  "cat" copies stdin to stdout until stdin is closed, "whoami" prints the client certificate's
  subject, "fail N" ends with exit code N. Anything else (SPDY, no upgrade) is a 400.

Usage: fake_kubelet.py <port> <cert.pem> <key.pem> <client-ca.pem>; prints "ready" once listening.
"""
import base64
import hashlib
import json
import socket
import ssl
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
V5 = "v5.channel.k8s.io"
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
FOLLOW_LIMIT = 600


def subject(cert):
    """The client certificate's subject as CN=...,O=..."""
    parts = []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            short = {"commonName": "CN", "organizationName": "O"}.get(key, key)
            parts.append(f"{short}={value}")
    return ",".join(parts)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-kubelet: " + (fmt % args) + "\n")

    def plain(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route(self):
        url = urllib.parse.urlsplit(self.path)
        return url, [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")], urllib.parse.parse_qs(url.query)

    def do_GET(self):
        url, parts, query = self.route()
        if parts[0] == "containerLogs" and len(parts) == 4:
            return self.logs(parts[1], parts[2], parts[3], url.query, query)
        return self.stream(parts, query)

    def do_POST(self):
        _, parts, query = self.route()
        return self.stream(parts, query)

    def logs(self, ns, pod, container, raw_query, query):
        if container == "gone":
            return self.plain(404, f"pod {ns}/{pod} not found")
        if container == "broken":
            return self.plain(500, f"container {container!r} is not running")
        if container == "query":
            return self.plain(200, raw_query + "\n")
        if container == "whoami":
            return self.plain(200, subject(self.connection.getpeercert()) + "\n")
        lines = [f"line {i} of {ns}/{pod}/{container}\n" for i in (1, 2, 3)]
        if "tailLines" in query:
            lines = lines[len(lines) - int(query["tailLines"][0]):]
        if query.get("follow") != ["true"]:
            return self.plain(200, "".join(lines))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i, line in enumerate(lines + [f"follow {n}\n" for n in range(1, FOLLOW_LIMIT)]):
                data = line.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                if i >= len(lines) - 1:
                    time.sleep(0.1)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass
        self.close_connection = True

    def stream(self, parts, query):
        upgrade = self.headers.get("Upgrade", "").lower()
        protocols = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if parts[0] not in ("exec", "attach") or len(parts) != 4:
            return self.plain(404, "404 page not found")
        if upgrade != "websocket" or V5 not in protocols:
            return self.plain(400, f"this kubelet speaks only WebSocket {V5} (upgrade {upgrade!r}, protocols {protocols})")
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", V5)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        command = query.get("command", []) if parts[0] == "exec" else ["attached"]
        try:
            self.session(command, query)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError, EOFError):
            pass

    # WebSocket framing (RFC 6455): client frames are masked, server frames are not.
    def read_exact(self, n):
        data = self.rfile.read(n)
        if len(data) < n:
            raise EOFError()
        return data

    def read_message(self):
        b0, b1 = self.read_exact(2)
        opcode, length = b0 & 0x0F, b1 & 0x7F
        if length == 126:
            length = int.from_bytes(self.read_exact(2), "big")
        elif length == 127:
            length = int.from_bytes(self.read_exact(8), "big")
        mask = self.read_exact(4) if b1 & 0x80 else bytes(4)
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self.read_exact(length)))
        return opcode, payload

    def send_frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = bytes([0x80 | opcode, n])
        elif n < 65536:
            head = bytes([0x80 | opcode, 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([0x80 | opcode, 127]) + n.to_bytes(8, "big")
        self.wfile.write(head + payload)
        self.wfile.flush()

    def send(self, stream, data):
        self.send_frame(0x2, bytes([stream]) + data)

    def session(self, command, query):
        status = {"metadata": {}, "status": "Success"}
        name = command[0] if command else ""
        if name == "echo":
            self.send(STDOUT, (" ".join(command[1:]) + "\n").encode())
        elif name == "whoami":
            self.send(STDOUT, (subject(self.connection.getpeercert()) + "\n").encode())
        elif name == "attached":
            self.send(STDOUT, b"attached\n")
        elif name == "cat":
            self.copy_stdin()
        elif name == "fail":
            code = command[1] if len(command) > 1 else "1"
            status = {"metadata": {}, "status": "Failure",
                      "message": f"command terminated with non-zero exit code: exit status {code}",
                      "reason": "NonZeroExitCode",
                      "details": {"causes": [{"reason": "ExitCode", "message": code}]}}
        else:
            self.send(STDERR, f"unknown command {command!r}\n".encode())
            status = {"metadata": {}, "status": "Failure", "message": f"unknown command {command!r}"}
        self.send(ERROR, json.dumps(status).encode())
        self.send_frame(0x8, (1000).to_bytes(2, "big"))
        self.connection.shutdown(socket.SHUT_RDWR)

    def copy_stdin(self):
        while True:
            opcode, payload = self.read_message()
            if opcode == 0x8:
                return
            if opcode == 0x9:
                self.send_frame(0xA, payload)
                continue
            if opcode != 0x2 or not payload:
                continue
            stream, data = payload[0], payload[1:]
            if stream == STDIN:
                self.send(STDOUT, data)
            elif stream == CLOSE and data[:1] == bytes([STDIN]):
                return


def main():
    port, cert, key, client_ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
