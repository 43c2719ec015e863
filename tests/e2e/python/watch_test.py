#!/usr/bin/env python3
"""Drives kapi with the official Python `kubernetes` client, the way controllers use it.

Usage: watch_test.py basic   list + watch while creating, resume from a resourceVersion
       watch_test.py gone    force 410 Gone after compaction and recover by relisting

KUBECONFIG must point at the server. Exits 0 on success, 1 with a message on failure, 2 when
the client library is missing (the Rust test turns that into a failure, never a skip).
"""

import sys
import threading
import time

try:
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
except ImportError as exc:  # the Rust side reports this as a failure
    print(f"FAIL: cannot import the kubernetes client: {exc}", file=sys.stderr)
    sys.exit(2)

WATCH_TIMEOUT = 20  # seconds; every watch call is bounded
GONE_DEADLINE = 90  # seconds to wait for compaction to produce a 410


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def pod(name, labels=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": "py"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="busybox:1.36")]),
    )


def make_namespace(v1, name):
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


def watch_events(v1, ns, rv, until, timeout=WATCH_TIMEOUT):
    """Watches pods in `ns` from `rv` until `until(events)` is true or the timeout ends.

    Returns [(type, name, resourceVersion)].
    """
    events = []
    w = watch.Watch()
    deadline = time.monotonic() + timeout
    for ev in w.stream(v1.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=timeout,
                       allow_watch_bookmarks=False):
        obj = ev["object"]
        events.append((ev["type"], obj.metadata.name, obj.metadata.resource_version))
        if until(events) or time.monotonic() > deadline:
            w.stop()
            break
    return events


def assert_increasing(events, what):
    rvs = [int(e[2]) for e in events]
    check(rvs == sorted(rvs) and len(set(rvs)) == len(rvs),
          f"{what}: resourceVersions not strictly increasing: {events}")


def basic(v1):
    ns = "py-basic"
    make_namespace(v1, ns)

    listed = v1.list_namespaced_pod(ns)
    check(listed.items == [], f"new namespace has pods: {listed.items}")
    rv0 = listed.metadata.resource_version
    check(rv0 and int(rv0) > 0, f"list resourceVersion {rv0!r}")

    # Watch from the list's resourceVersion while another thread creates pods.
    names = [f"pod-{i}" for i in range(5)]
    result = {}

    def watcher():
        try:
            result["events"] = watch_events(
                v1, ns, rv0, lambda evs: sum(1 for e in evs if e[0] == "ADDED") >= len(names))
        except Exception as exc:  # reported by the main thread
            result["error"] = exc

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    created = [v1.create_namespaced_pod(ns, pod(n)) for n in names]
    t.join(WATCH_TIMEOUT + 5)
    check(not t.is_alive(), "watch thread did not finish")
    if "error" in result:
        raise Failure(f"watch failed: {result['error']!r}")
    events = result["events"]
    check([(e[0], e[1]) for e in events] == [("ADDED", n) for n in names],
          f"watch while creating: expected ADDED {names}, got {events}")
    check([e[2] for e in events] == [p.metadata.resource_version for p in created],
          f"event resourceVersions differ from create responses: {events}")
    assert_increasing(events, "live watch")

    # The list now shows every pod, at a resourceVersion not older than the last create.
    listed = v1.list_namespaced_pod(ns)
    check(sorted(p.metadata.name for p in listed.items) == names, f"list after creates: {listed.items}")
    check(int(listed.metadata.resource_version) >= int(created[-1].metadata.resource_version),
          "list resourceVersion older than the last write")
    for p in listed.items:
        check(p.status is not None and p.status.phase == "Pending", f"{p.metadata.name} phase {p.status}")
        check(p.spec.restart_policy == "Always" and p.spec.dns_policy == "ClusterFirst",
              f"{p.metadata.name} not defaulted: {p.spec}")

    # Resume from the third event: exactly the later events, in order, none repeated.
    resume_rv = events[2][2]
    # The client's default patch type: strategic merge patch.
    v1.patch_namespaced_pod("pod-3", ns, {"metadata": {"labels": {"touched": "yes"}}})
    v1.delete_namespaced_pod("pod-4", ns, body=client.V1DeleteOptions(grace_period_seconds=0))
    v1.create_namespaced_pod(ns, pod("pod-5"))
    expected = [("ADDED", "pod-3"), ("ADDED", "pod-4"), ("MODIFIED", "pod-3"),
                ("DELETED", "pod-4"), ("ADDED", "pod-5")]
    resumed = watch_events(v1, ns, resume_rv, lambda evs: len(evs) >= len(expected))
    check([(e[0], e[1]) for e in resumed] == expected,
          f"resume from {resume_rv}: expected {expected}, got {resumed}")
    check(int(resumed[0][2]) > int(resume_rv), f"resume repeated the event at {resume_rv}: {resumed}")
    assert_increasing(resumed, "resumed watch")

    # Resuming from the last event sees nothing old, then exactly one new event.
    last_rv = resumed[-1][2]
    result.clear()

    def tail():
        try:
            result["events"] = watch_events(v1, ns, last_rv, lambda evs: len(evs) >= 1)
        except Exception as exc:
            result["error"] = exc

    t = threading.Thread(target=tail)
    t.start()
    time.sleep(0.5)
    v1.create_namespaced_pod(ns, pod("pod-6"))
    t.join(WATCH_TIMEOUT + 5)
    if "error" in result:
        raise Failure(f"tail watch failed: {result['error']!r}")
    check([(e[0], e[1]) for e in result.get("events", [])] == [("ADDED", "pod-6")],
          f"watch from the last resourceVersion: {result.get('events')}")

    # Label-selected watch only sees matching objects.
    sel = watch.Watch()
    matched = []
    v1.create_namespaced_pod(ns, pod("other", labels={"app": "other"}))
    for ev in sel.stream(v1.list_namespaced_pod, ns, label_selector="app=other", resource_version=rv0,
                         timeout_seconds=WATCH_TIMEOUT):
        matched.append((ev["type"], ev["object"].metadata.name))
        sel.stop()
        break
    check(matched == [("ADDED", "other")], f"label-selected watch: {matched}")
    print("basic: list, live watch, resume and selector watch OK")


def gone(v1):
    ns = "py-gone"
    make_namespace(v1, ns)
    first = v1.create_namespaced_pod(ns, pod("first"))
    old_rv = first.metadata.resource_version
    names = ["first"]

    # Churn past the watch cache window and the compaction window, then wait for a 410.
    deadline = time.monotonic() + GONE_DEADLINE
    got_gone = None
    i = 0
    while time.monotonic() < deadline:
        for _ in range(10):
            name = f"churn-{i}"
            v1.create_namespaced_pod(ns, pod(name))
            names.append(name)
            i += 1
        time.sleep(1.5)
        try:
            evs = watch_events(v1, ns, old_rv, lambda evs: True, timeout=2)
        except ApiException as exc:
            if exc.status == 410:
                got_gone = exc
                break
            raise Failure(f"watch from a compacted resourceVersion: expected 410, got {exc.status}: {exc.reason}")
        # Not compacted yet: the watch must start right after `first`.
        check(evs and evs[0][:2] == ("ADDED", "churn-0"), f"watch from {old_rv} before compaction: {evs}")
    check(got_gone is not None,
          f"no 410 Gone within {GONE_DEADLINE}s for resourceVersion {old_rv} after {i} writes")
    print(f"gone: watch from {old_rv} answered 410 ({got_gone.reason.strip()})")

    # Informer recovery: relist, then watch from the fresh resourceVersion.
    listed = v1.list_namespaced_pod(ns)
    check(sorted(p.metadata.name for p in listed.items) == sorted(names),
          f"relist after 410 lost or invented pods: {len(listed.items)} listed, {len(names)} created")
    fresh_rv = listed.metadata.resource_version
    result = {}

    def watcher():
        try:
            result["events"] = watch_events(v1, ns, fresh_rv, lambda evs: len(evs) >= 1)
        except Exception as exc:
            result["error"] = exc

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    v1.create_namespaced_pod(ns, pod("after-relist"))
    t.join(WATCH_TIMEOUT + 5)
    if "error" in result:
        raise Failure(f"watch after relist failed: {result['error']!r}")
    check([(e[0], e[1]) for e in result.get("events", [])] == [("ADDED", "after-relist")],
          f"watch after relist: {result.get('events')}")

    # A list at an exact compacted resourceVersion is also 410.
    try:
        v1.list_namespaced_pod(ns, resource_version=old_rv, resource_version_match="Exact")
        raise Failure(f"list at compacted resourceVersion {old_rv} (Exact) succeeded")
    except ApiException as exc:
        check(exc.status == 410, f"list at compacted resourceVersion: expected 410, got {exc.status}")
    print("gone: relist and re-watch OK")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("basic", "gone"):
        print(__doc__, file=sys.stderr)
        return 64
    config.load_kube_config()
    v1 = client.CoreV1Api()
    try:
        {"basic": basic, "gone": gone}[sys.argv[1]](v1)
    except Failure as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    except ApiException as exc:
        print(f"FAIL: unexpected API error {exc.status} {exc.reason}: {exc.body}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
