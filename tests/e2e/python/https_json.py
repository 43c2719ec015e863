"""What the e2e tests' HTTPS webhooks share: answering JSON, and serving on 127.0.0.1 with a
certificate, printing "ready" once listening (the harness waits for it)."""
import json
import ssl
from http.server import ThreadingHTTPServer


def send_bytes(handler, body, status=200, content_type="application/json"):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def send_json(handler, answer, status=200):
    send_bytes(handler, json.dumps(answer).encode(), status)


def serve(handler_class, port, cert, key):
    server = ThreadingHTTPServer(("127.0.0.1", port), handler_class)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()
