"""An extension API server for the aggregator tests, shaped like metrics-server: it serves
metrics.k8s.io/v1beta1 (NodeMetrics, PodMetrics) over HTTPS, trusts only clients whose
certificate its front-proxy CA signed with the name front-proxy-client, takes the caller from
the X-Remote-* headers as an aggregated server does, and logs every request as a JSON line.

Usage: metrics_apiserver.py PORT CERT KEY FRONT_PROXY_CA LOG
"""
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from https_json import send_json

GV = "metrics.k8s.io/v1beta1"
PORT, CERT, KEY, FRONT_PROXY_CA, LOG = sys.argv[1:6]

RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": GV,
    "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
    ],
}


def pod_metrics(namespace, name, cpu, memory):
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "timestamp": "2026-01-01T00:00:00Z",
        "window": "15s",
        "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}}],
    }


PODS = [pod_metrics("default", "web-1", "250m", "64Mi"), pod_metrics("default", "web-2", "125m", "32Mi"), pod_metrics("other", "db-0", "1", "1Gi")]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        peer = self.connection.getpeercert() or {}
        cn = [v for rdn in peer.get("subject", ()) for (k, v) in rdn if k == "commonName"]
        entry = {
            "method": self.command,
            "path": self.path,
            "user": self.headers.get("X-Remote-User"),
            "groups": self.headers.get_all("X-Remote-Group") or [],
            "authorization": self.headers.get("Authorization"),
            "client_cn": cn[0] if cn else None,
        }
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")
        return entry

    def do_GET(self):
        entry = self.record()
        if entry["client_cn"] != "front-proxy-client" or not entry["user"]:
            send_json(self, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401, "message": "Unauthorized"}, 401)
            return
        path = self.path.split("?")[0].rstrip("/")
        prefix = "/apis/" + GV
        if path == prefix:
            send_json(self, RESOURCES)
        elif path == prefix + "/pods":
            send_json(self, {"kind": "PodMetricsList", "apiVersion": GV, "metadata": {}, "items": PODS})
        elif path.startswith(prefix + "/namespaces/") and path.endswith("/pods"):
            namespace = path[len(prefix + "/namespaces/"):-len("/pods")]
            items = [p for p in PODS if p["metadata"]["namespace"] == namespace]
            send_json(self, {"kind": "PodMetricsList", "apiVersion": GV, "metadata": {}, "items": items})
        elif path == prefix + "/nodes":
            node = {"metadata": {"name": "node-1"}, "timestamp": "2026-01-01T00:00:00Z", "window": "15s", "usage": {"cpu": "2", "memory": "4Gi"}}
            send_json(self, {"kind": "NodeMetricsList", "apiVersion": GV, "metadata": {}, "items": [node]})
        else:
            send_json(self, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "the server could not find the requested resource"}, 404)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(PORT)), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT, KEY)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(FRONT_PROXY_CA)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
