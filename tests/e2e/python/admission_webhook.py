"""An admission webhook for the e2e tests: HTTPS, AdmissionReview v1 and v1beta1.

Usage: admission_webhook.py <port> <cert.pem> <key.pem> <log.jsonl>; prints "ready" once
listening. What it answers depends on the path of the webhook's URL (kube allows no query in
webhook URLs, so arguments are path segments, percent-encoded):

  /allow                      allowed
  /deny/<code>/<reason>/<msg> refused with that status (code 0, reason "-": none given)
  /label/<key>/<value>        allowed with a JSONPatch setting metadata.labels[key] = value
  /sleep/<seconds>            allowed after that long
  /warn/<text>                allowed with that warning
  /audit/<key>/<value>        allowed with that audit annotation
  /garbage                    an answer that is not JSON
  /wrong-uid                  an answer for another request
  /bad-patch                  a JSONPatch that cannot apply

Every call appends one JSON line {"path": "/<first segment>", "args": [...], "query": {...},
"apiVersion": <the review's>, "request": <the review's request>, "traceparent": <the header or
null>} to the log, so tests can count and inspect calls.
"""
import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from https_json import send_bytes, serve

LOG_LOCK = threading.Lock()


def label_patch(obj, key, value):
    labels = (obj.get("metadata") or {}).get("labels")
    escaped = key.replace("~", "~0").replace("/", "~1")
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [{"op": "add", "path": "/metadata/labels/" + escaped, "value": value}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(length))
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        segments = [unquote(p) for p in url.path.strip("/").split("/")]
        action, args = "/" + segments[0], segments[1:]
        request = review["request"]
        with LOG_LOCK, open(sys.argv[4], "a") as log:
            log.write(json.dumps({"path": action, "args": args, "query": query, "apiVersion": review["apiVersion"], "request": request,
                                  "traceparent": self.headers.get("traceparent")}) + "\n")
        response = {"uid": request["uid"], "allowed": True}
        if action == "/deny":
            status = {"message": args[2]}
            if int(args[0]):
                status["code"] = int(args[0])
            if args[1] != "-":
                status["reason"] = args[1]
            response = {"uid": request["uid"], "allowed": False, "status": status}
        elif action == "/label":
            patch = label_patch(request.get("object") or {}, args[0], args[1])
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        elif action == "/sleep":
            time.sleep(float(args[0]))
        elif action == "/warn":
            response["warnings"] = [args[0]]
        elif action == "/audit":
            response["auditAnnotations"] = {args[0]: args[1]}
        elif action == "/wrong-uid":
            response["uid"] = "not-" + request["uid"]
        elif action == "/bad-patch":
            patch = [{"op": "replace", "path": "/no/such/field", "value": 1}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        if action == "/garbage":
            body = b"<html>not a review</html>"
        else:
            body = json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}).encode()
        send_bytes(self, body)

    def log_message(self, *args):
        pass


def main():
    serve(Handler, int(sys.argv[1]), sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
