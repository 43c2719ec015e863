"""A KMS v2 plugin for the tests: a real gRPC server (grpcio) on a Unix socket serving
kube's `v2.KeyManagementService` (Status, Encrypt, Decrypt).

It really encrypts: AES-256-GCM under a key per key ID (`key-1`, `key-2`, ...), kept in a JSON
file beside the socket so a restarted plugin still decrypts what it encrypted. SIGUSR1 rotates
to a new key ID (old keys still decrypt). Each call prints one line (`Encrypt key-1`,
`Decrypt key-2`, `Status key-1`) so the test can count them; `listening KEY PID` once ready.

Messages are encoded by hand (no generated code): every field used is a string, bytes or a
`map<string, bytes>`.

Usage: kms_plugin.py SOCKET KEYS_JSON
"""

import json
import os
import signal
import sys
import threading
from concurrent import futures

import grpc
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number, data):
    if isinstance(data, str):
        data = data.encode()
    if not data:
        return b""
    return varint(number << 3 | 2) + varint(len(data)) + data


def parse(message):
    """{field number: [values]} of a message with only length-delimited fields."""
    fields, i = {}, 0
    while i < len(message):
        key, shift = 0, 0
        while True:
            b = message[i]
            i += 1
            key |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if key & 7 != 2:
            raise ValueError("unexpected wire type %d" % (key & 7))
        length, shift = 0, 0
        while True:
            b = message[i]
            i += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        fields.setdefault(key >> 3, []).append(message[i : i + length])
        i += length
    return fields


class Keys:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            self.current, self.keys = saved["current"], {k: bytes.fromhex(v) for k, v in saved["keys"].items()}
        else:
            self.current, self.keys = None, {}
            self.rotate()

    def rotate(self):
        with self.lock:
            key_id = "key-%d" % (len(self.keys) + 1)
            self.keys[key_id] = AESGCM.generate_key(bit_length=256)
            self.current = key_id
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"current": self.current, "keys": {k: v.hex() for k, v in self.keys.items()}}, f)
            os.replace(tmp, self.path)
            return key_id


def say(line):
    print(line, flush=True)


def main():
    socket_path, keys_path = sys.argv[1], sys.argv[2]
    keys = Keys(keys_path)

    def status(_request, _context):
        say("Status " + keys.current)
        return field(1, "v2") + field(2, "ok") + field(3, keys.current)

    def encrypt(request, _context):
        plaintext = parse(request).get(1, [b""])[0]
        key_id = keys.current
        nonce = os.urandom(12)
        ciphertext = nonce + AESGCM(keys.keys[key_id]).encrypt(nonce, plaintext, key_id.encode())
        say("Encrypt " + key_id)
        return field(1, ciphertext) + field(2, key_id)

    def decrypt(request, context):
        fields = parse(request)
        ciphertext, key_id = fields.get(1, [b""])[0], fields.get(3, [b""])[0].decode()
        say("Decrypt " + key_id)
        key = keys.keys.get(key_id)
        if key is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown key ID %s" % key_id)
        try:
            plaintext = AESGCM(key).decrypt(ciphertext[:12], ciphertext[12:], key_id.encode())
        except Exception:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "ciphertext does not open under %s" % key_id)
        return field(1, plaintext)

    raw = {"request_deserializer": lambda b: b, "response_serializer": lambda b: b}
    handler = grpc.method_handlers_generic_handler(
        "v2.KeyManagementService",
        {
            "Status": grpc.unary_unary_rpc_method_handler(status, **raw),
            "Encrypt": grpc.unary_unary_rpc_method_handler(encrypt, **raw),
            "Decrypt": grpc.unary_unary_rpc_method_handler(decrypt, **raw),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    server.add_insecure_port("unix://" + socket_path)
    server.start()
    signal.signal(signal.SIGUSR1, lambda *_: say("rotated " + keys.rotate()))
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    say("listening %s %d" % (keys.current, os.getpid()))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
