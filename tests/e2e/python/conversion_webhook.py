"""A CRD conversion webhook for the e2e tests: HTTPS, ConversionReview apiextensions.k8s.io/v1.

apps.demo.io: v1alpha1 keeps the image at spec.image; v1 moves it to spec.container.image.
Usage: conversion_webhook.py <port> <cert.pem> <key.pem>; prints "ready" once listening.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler

from https_json import send_json, serve


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
        send_json(self, answer)

    def log_message(self, *args):
        pass


def main():
    serve(Handler, int(sys.argv[1]), sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
