#!/usr/bin/env python3
"""Generates libs/protobuf-codec/src/schema.txt: the protobuf field layout of every Kubernetes
message, joined with the JSON field names Kubernetes uses.

Sources (both locked dependencies of the workspace, read from cargo's registry checkout):
- k8s-pb: prost structs with `#[prost(<type>, <label>, tag = "N")]` attributes (wire layout);
- k8s-openapi (v1_36): serde `"jsonName" => Field::Key_rust_name` matches (JSON names).
prost and k8s-openapi snake-case Go names differently (`podIPs` -> `pod_i_ps` / `pod_ips`), so
fields are joined on lowercase alphanumerics. Go embedded structs (no JSON name of their own,
their fields inlined) are marked `i`. Messages k8s-openapi does not have (Table,
PartialObjectMetadata, ...) and feature-gated fields it lacks get lowerCamelCase names, which is
how Go's JSON tags are written; the latter are listed in the file's header.

Usage: scripts/gen-protobuf-schema.py [--check]   (--check: exit 1 if the committed file differs)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "libs", "protobuf-codec", "src", "schema.txt")
OPENAPI_VERSION = "v1_36"

# Messages whose JSON form is not an object of their fields; the codec handles them by name.
SPECIAL = {
    "apimachinery.pkg.api.resource.Quantity",
    "apimachinery.pkg.apis.meta.v1.Time",
    "apimachinery.pkg.apis.meta.v1.MicroTime",
    "apimachinery.pkg.apis.meta.v1.Duration",
    "apimachinery.pkg.apis.meta.v1.FieldsV1",
    "apimachinery.pkg.runtime.RawExtension",
    "apimachinery.pkg.util.intstr.IntOrString",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool",
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray",
}


def package_dirs():
    """Sources of the locked k8s-pb and k8s-openapi in cargo's registry (run `cargo fetch` first)."""
    lock = open(os.path.join(ROOT, "Cargo.lock"), encoding="utf-8").read()
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    registry = os.path.join(cargo_home, "registry", "src")
    found = {}
    for name in ("k8s-pb", "k8s-openapi"):
        m = re.search(r'\[\[package\]\]\nname = "%s"\nversion = "([^"]+)"' % re.escape(name), lock)
        if not m:
            sys.exit(f"Cargo.lock does not lock {name}")
        version = m.group(1)
        for index in sorted(os.listdir(registry)) if os.path.isdir(registry) else []:
            src = os.path.join(registry, index, f"{name}-{version}", "src")
            if os.path.isdir(src):
                found[name] = (version, src)
                break
        else:
            sys.exit(f"{name} {version} sources not found under {registry}: run `cargo fetch`")
    return found


def norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("r#"))


def camel(snake):
    parts = snake.removeprefix("r#").split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


FIELD_RE = re.compile(
    r"#\[prost\((?P<attr>[^\]]*)\)\]\s*pub\s+(?P<name>(?:r#)?\w+)\s*:\s*(?P<ty>.*?),\s*(?=(?:///|#\[|pub\s|\}))",
    re.S)
STRUCT_RE = re.compile(r"#\[derive\([^)]*::prost::Message\)\]\s*pub struct (\w+) \{(\}|.*?\n\})", re.S)
RESOURCE_RE = re.compile(
    r'impl crate::Resource for (\w+) \{.*?API_VERSION: &\'static str = "([^"]*)";.*?KIND: &\'static str = "([^"]*)";',
    re.S)


def resolve(module, ty_path):
    """Absolute k8s-pb module path of a (possibly `super::`-relative) type path."""
    ty_path = re.sub(r"\s+", "", ty_path)
    if ty_path.startswith("crate::"):
        return ty_path[len("crate::"):].replace("::", ".")
    parts = module.split(".")
    segs = ty_path.split("::")
    while segs and segs[0] == "super":
        parts = parts[:-1]
        segs = segs[1:]
    return ".".join(parts + segs)


def compact(ty):
    """A type without whitespace or rustfmt's trailing commas inside generics."""
    return re.sub(r"\s+", "", ty).replace(",>", ">").rstrip(",")


def message_type(module, ty):
    ty = compact(ty)
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while ty.startswith(wrapper):
            ty = ty[len(wrapper):-1]
    return resolve(module, ty)


SUBRESOURCE_KINDS = [
    ("authentication.k8s.io/v1", "TokenRequest", "api.authentication.v1.TokenRequest"),
    ("autoscaling/v1", "Scale", "api.autoscaling.v1.Scale"),
    ("policy/v1", "Eviction", "api.policy.v1.Eviction"),
]


def parse_pb(src):
    messages = {}   # full name -> [(tag, rust_name, label, type, map_key, msg)]
    resources = []  # (apiVersion, kind, message)
    for dirpath, _, files in os.walk(src):
        if "mod.rs" not in files:
            continue
        rel = os.path.relpath(dirpath, src)
        if rel == ".":
            continue
        module = rel.replace(os.sep, ".")
        text = open(os.path.join(dirpath, "mod.rs"), encoding="utf-8").read()
        for m in STRUCT_RE.finditer(text):
            name, body = m.group(1), m.group(2)
            fields = []
            for f in FIELD_RE.finditer(body):
                attr = f.group("attr")
                tag = int(re.search(r'tag\s*=\s*"(\d+)"', attr).group(1))
                kind = attr.split(",")[0].strip()
                label = "r" if "repeated" in attr else "o"
                if kind.startswith("btree_map") or kind.startswith("map"):
                    kv = re.search(r'=\s*"([^"]*)"', attr).group(1)
                    key, val = [x.strip() for x in kv.split(",")]
                    msg = ""
                    if val.startswith("message"):
                        inner = re.search(r"BTreeMap<[^,]*,(.*)>$", compact(f.group("ty"))).group(1)
                        msg = message_type(module, inner)
                        val = "message"
                    fields.append((tag, f.group("name"), "m", val, key, msg))
                    continue
                if kind.startswith("bytes"):
                    kind = "bytes"
                msg = message_type(module, f.group("ty")) if kind == "message" else ""
                fields.append((tag, f.group("name"), label, kind, "", msg))
            messages[f"{module}.{name}"] = fields
        for r in RESOURCE_RE.finditer(text):
            resources.append((r.group(2), r.group(3), f"{module}.{r.group(1)}"))
    return messages, resources


def parse_openapi(src):
    """JSON names per type, keyed like k8s-pb messages (module path, normalized struct name)."""
    names = {}
    base = os.path.join(src, OPENAPI_VERSION)
    for dirpath, _, files in os.walk(base):
        module = os.path.relpath(dirpath, base).replace(os.sep, ".")
        for fname in files:
            if not fname.endswith(".rs") or fname == "mod.rs":
                continue
            text = open(os.path.join(dirpath, fname), encoding="utf-8").read()
            s = re.search(r"pub struct (\w+)", text)
            if not s:
                continue
            json_names = re.findall(r'"([^"]+)" => Field::Key_\w+', text)
            names[(module, norm(s.group(1)))] = {norm(j): j for j in json_names}
    return names


def main():
    check = "--check" in sys.argv[1:]
    pkgs = package_dirs()
    messages, resources = parse_pb(pkgs["k8s-pb"][1])
    json_names = parse_openapi(pkgs["k8s-openapi"][1])
    header = [
        f"# Generated by scripts/gen-protobuf-schema.py from k8s-pb {pkgs['k8s-pb'][0]} and "
        f"k8s-openapi {pkgs['k8s-openapi'][0]} ({OPENAPI_VERSION}). Do not edit.",
        "# R <apiVersion> <kind> <message> | M <message> | F <tag> <json> <o|r|m|i> <type> [<mapKey>] [<message>]",
        "# labels: o optional, r repeated, m map, i inline (a Go embedded struct: fields flattened into the parent)",
    ]
    body = []
    # Bodies of subresources that k8s-pb does not mark as resources but clients send as
    # protobuf (client-go's typed CreateToken, UpdateScale, evictions).
    resources = resources + [r for r in SUBRESOURCE_KINDS if r not in resources]
    for api_version, kind, msg in sorted(resources):
        body.append(f"R {api_version} {kind} {msg}")
        list_msg = msg + "List"
        if list_msg in messages:
            body.append(f"R {api_version} {kind}List {list_msg}")
    missing = []
    for full in sorted(messages):
        module, _, struct = full.rpartition(".")
        known = json_names.get((module, norm(struct)))
        body.append(f"M {full}")
        for tag, rust, label, ty, key, msg in sorted(messages[full]):
            json_name = camel(rust)
            if known is not None and full not in SPECIAL:
                match = known.get(norm(rust))
                if match is not None:
                    json_name = match
                elif ty == "message" and label == "o" and msg in messages and any(
                        norm(sub[1]) in known for sub in messages[msg]):
                    label = "i"
                else:
                    missing.append(f"{full}.{rust} -> {json_name}")
            parts = ["F", str(tag), json_name, label, ty]
            if label == "m":
                parts.append(key)
            if msg:
                parts.append(msg)
            body.append(" ".join(parts))
    header += [f"# not in k8s-openapi, camelCased: {m}" for m in missing]
    text = "\n".join(header + body) + "\n"
    if check:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit(f"{os.path.relpath(OUT, ROOT)} is stale: run scripts/gen-protobuf-schema.py")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {sum(1 for l in body if l.startswith('M '))} messages, "
          f"{sum(1 for l in body if l.startswith('R '))} kinds, {len(missing)} camelCased fields")


if __name__ == "__main__":
    main()
