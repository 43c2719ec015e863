"""An authentication, authorization and audit webhook for the e2e tests: HTTPS, TokenReview at
/authenticate, SubjectAccessReview at /authorize (v1 and v1beta1), audit EventLists at /audit.

Tokens: "alice-token" is alice (groups team-a, uid u-1, extra scopes=[read]); "revoked-token"
is refused with an error; anything else is unknown. Authorization: alice may get and list
configmaps; her deletes are denied; everything else gets no opinion.
kapi must present "Authorization: Bearer webhook-secret". Every call is appended to the log
file as one JSON line {"path": ..., "spec": ...}; each audit event as {"path": "/audit", "event": ...}.
Usage: auth_webhook.py <port> <cert.pem> <key.pem> <log>; prints "ready" once listening.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler

from https_json import send_json, serve

LOCK = threading.Lock()


def token_status(spec):
    token = spec.get("token")
    if token == "alice-token":
        return {"authenticated": True, "user": {"username": "alice", "uid": "u-1", "groups": ["team-a"], "extra": {"scopes": ["read"]}}}
    if token == "revoked-token":
        return {"authenticated": False, "error": "token revoked"}
    return {"authenticated": False}


def access_status(spec):
    attrs = spec.get("resourceAttributes") or {}
    if spec.get("user") != "alice" or attrs.get("resource") != "configmaps":
        return {"allowed": False}
    if attrs.get("verb") in ("get", "list"):
        return {"allowed": True, "reason": "alice reads configmaps"}
    if attrs.get("verb") == "delete":
        return {"allowed": False, "denied": True, "reason": "alice may not delete configmaps"}
    return {"allowed": False}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(length))
        if self.headers.get("Authorization") != "Bearer webhook-secret":
            self.send_response(401)
            self.end_headers()
            return
        path = self.path.split("?")[0]
        if path == "/audit":
            with LOCK, open(sys.argv[4], "a") as log:
                for event in review.get("items", []):
                    log.write(json.dumps({"path": path, "apiVersion": review.get("apiVersion"), "event": event}) + "\n")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with LOCK, open(sys.argv[4], "a") as log:
            log.write(json.dumps({"path": path, "apiVersion": review.get("apiVersion"), "spec": review.get("spec")}) + "\n")
        status = token_status(review["spec"]) if path == "/authenticate" else access_status(review["spec"])
        send_json(self, {"apiVersion": review["apiVersion"], "kind": review["kind"], "status": status})

    def log_message(self, *args):
        pass


def main():
    serve(Handler, int(sys.argv[1]), sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
