"""An OpenID Connect issuer for the e2e tests: HTTPS, two issuers on one port
(https://127.0.0.1:<port> and https://127.0.0.1:<port>/email), each serving
/.well-known/openid-configuration naming one JWKS at /keys. Keys are RSA 2048, made at start.

POST /sign {"header": {...}, "claims": {...}, "with": "current"|"stranger"|"hmac-public"|"none"}
  answers the compact JWT: signed RS256 by the current key (kid filled in unless given), by a
  key the JWKS does not publish, HS256 with the current public key's PEM as the secret, or
  unsigned.
POST /rotate makes a new current key; the JWKS then publishes only it.
GET /stats answers {"discovery": n, "jwks": n}: the fetches so far.
Usage: oidc_issuer.py <port> <cert.pem> <key.pem>; prints "ready" once listening.
"""
import base64
import hashlib
import hmac
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

LOCK = threading.Lock()
PORT = int(sys.argv[1])
BASE = "https://127.0.0.1:%d" % PORT
STATS = {"discovery": 0, "jwks": 0}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_key(kid):
    return {"kid": kid, "key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}


KEYS = {"current": new_key("key-1"), "stranger": new_key("stranger"), "generation": 1}


def jwk(entry):
    numbers = entry["key"].public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": entry["kid"], "n": b64(n), "e": b64(e)}


def sign(request):
    header = dict(request.get("header") or {})
    claims = request["claims"]
    how = request.get("with", "current")
    with LOCK:
        current = KEYS["current"]
        stranger = KEYS["stranger"]
    if how == "none":
        header.setdefault("alg", "none")
    elif how == "hmac-public":
        header.setdefault("alg", "HS256")
        header.setdefault("kid", current["kid"])
    else:
        entry = current if how == "current" else stranger
        header.setdefault("alg", "RS256")
        header.setdefault("kid", entry["kid"])
    signing_input = (b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())).encode()
    if how == "none":
        signature = b""
    elif how == "hmac-public":
        secret = current["key"].public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
    else:
        signature = entry["key"].sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return signing_input.decode() + "." + b64(signature)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, code, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path in ("/.well-known/openid-configuration", "/email/.well-known/openid-configuration"):
            issuer = BASE + path[: -len("/.well-known/openid-configuration")]
            with LOCK:
                STATS["discovery"] += 1
            self.answer(200, {"issuer": issuer, "jwks_uri": BASE + "/keys", "id_token_signing_alg_values_supported": ["RS256"]})
        elif path == "/keys":
            with LOCK:
                STATS["jwks"] += 1
                keys = [jwk(KEYS["current"])]
            self.answer(200, {"keys": keys})
        elif path == "/stats":
            with LOCK:
                self.answer(200, dict(STATS))
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/sign":
            self.answer(200, sign(body).encode())
        elif self.path == "/rotate":
            with LOCK:
                KEYS["generation"] += 1
                KEYS["current"] = new_key("key-%d" % KEYS["generation"])
                kid = KEYS["current"]["kid"]
            self.answer(200, {"kid": kid})
        else:
            self.answer(404, {"error": "not found"})

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
