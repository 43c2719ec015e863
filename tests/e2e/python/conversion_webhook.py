"""A CRD conversion webhook for the e2e tests: HTTPS, ConversionReview apiextensions.k8s.io/v1.

apps.demo.io: v1alpha1 keeps the image at spec.image; v1 moves it to spec.container.image.
Usage: conversion_webhook.py <port> <cert.pem> <key.pem>; prints "ready" once listening.
"""
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def convert(obj, desired):
    obj = json.loads(json.dumps(obj))
    version = obj["apiVersion"].split("/")[1]
    target = desired.split("/")[1]
    spec = obj.setdefault("spec", {})
    if version == "v1alpha1" and target == "v1":
        image = spec.pop("image", None)
        if image is not None:
            spec["container"] = {"image": image}
    elif version == "v1" and target == "v1alpha1":
        container = spec.pop("container", None) or {}
        if "image" in container:
            spec["image"] = container["image"]
    obj["apiVersion"] = desired
    # A webhook may change labels and annotations; kube keeps only those.
    obj.setdefault("metadata", {}).setdefault("annotations", {})["converted-by"] = "e2e-webhook"
    return obj


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(length))
        request = review["request"]
        converted = [convert(o, request["desiredAPIVersion"]) for o in request["objects"]]
        answer = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {"uid": request["uid"], "convertedObjects": converted, "result": {"status": "Success"}},
        }
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
