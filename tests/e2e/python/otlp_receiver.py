"""An OTLP trace receiver for the e2e tests: a real gRPC server speaking the collector's
TraceService (opentelemetry-proto's stubs over grpcio), as an OpenTelemetry collector does.

Usage: otlp_receiver.py <port> <spans.jsonl>; prints "ready" once listening on 127.0.0.1.
Every span received is appended to the log as one JSON line:
{"trace_id", "span_id", "parent_span_id" (hex, "" for a root), "name", "kind" (OTLP's number),
 "attributes": {key: value}, "links": [{"trace_id", "span_id"}], "resource": {key: value},
 "scope": the instrumentation scope's name, "start", "end" (Unix nanoseconds)}.
"""
import json
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, kind)
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "attributes": attributes(span.attributes),
                        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in span.links],
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                    }))
        with LOCK, open(sys.argv[2], "a") as log:
            for line in lines:
                log.write(line + "\n")
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    server.add_insecure_port("127.0.0.1:" + sys.argv[1])
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
