#!/usr/bin/env python3
"""Generates libs/openapi/src/list_docs.rs: the descriptions kube's OpenAPI gives every
`<Kind>List` definition (the list itself, its `items` and its `metadata`).

Why a generated file: k8s-openapi, the schema source of every other definition, collapses the
list types into one generic `List<T>` and so drops their own documentation ("ServiceList holds a
list of services.", "List of services"). kube's OpenAPI texts are the Go doc comments of the
types, run through openapi-gen's comment formatting; k8s-pb (a locked dependency of the
workspace) carries the same Go comments, copied into the .proto files and from there into
prost's doc comments. This script reads them from cargo's registry checkout and formats them as
openapi-gen does (lines joined by spaces, blank lines kept as paragraph breaks, `+tag` and `TODO`
lines dropped, indented lines kept on lines of their own, everything after `---` dropped), after
undoing prost's markdown escapes (`\\[`, `<https://...>`).

As a check of that formatting, it compares the top-level description of every type that both
k8s-pb and k8s-openapi (v1_36) have and prints how many agree; the few that differ are texts
changed between the two crates' Kubernetes versions.

Usage: scripts/gen-openapi-list-docs.py [--check]   (--check: exit 1 if the committed file differs)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "libs", "openapi", "src", "list_docs.rs")
OPENAPI_VERSION = "v1_36"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
package_dirs = __import__("gen-protobuf-schema").package_dirs

# k8s-pb module roots -> kube's definition name prefixes.
PREFIXES = {
    "api": "io.k8s.api",
    "apimachinery": "io.k8s.apimachinery",
    "apiextensions_apiserver": "io.k8s.apiextensions-apiserver",
    "kube_aggregator": "io.k8s.kube-aggregator",
}

STRUCT_RE = re.compile(r"((?:^///[^\n]*\n)*)#\[derive\([^)]*::prost::Message\)\]\npub struct (\w+) \{(\}|.*?\n\})",
                       re.S | re.M)
FIELD_RE = re.compile(r"((?:^ {4}///[^\n]*\n)*)(?: {4}#\[[^\n]*\n)*\s{4}pub (\w+):", re.M)


def doc_lines(block, indent):
    """The comment lines of a `///` block, as the .proto (and Go) source wrote them."""
    lines = []
    for raw in block.splitlines():
        line = raw[indent:]
        if not line.startswith("///"):
            continue
        # prost writes `/// ` before each .proto comment line, and go-to-protobuf had already
        # put one space of its own before each indented Go line.
        line = line[3:]
        line = line[1:] if line.startswith(" ") else line
        line = line[1:] if line.startswith(" ") else line
        line = re.sub(r"<(https?://[^>\s]+)>", r"\1", line)
        line = line.replace("\\[", "[").replace("\\]", "]")
        lines.append(line)
    return lines


def fmt_raw_doc(lines):
    """openapi-gen's comment formatting (k8s.io/kube-openapi's `fmtRawDoc`)."""
    text = "\n".join(lines).split("---")[0]
    out = ""
    for line in text.split("\n"):
        line = line.rstrip(" ")
        leading = line.lstrip(" ")
        if not line:
            out = out[:-1] if out else out
            out += "\n\n"
        elif leading.startswith("TODO") or leading.startswith("+"):
            continue
        elif line.startswith(" ") or line.startswith("\t"):
            out = out[:-1] if out else out
            out += "\n" + line + "\n"
        else:
            out += line + " "
    return out.rstrip("\n").rstrip(" ")


def definition_prefix(module):
    root, _, rest = module.partition(".")
    return PREFIXES[root] + ("." + rest if rest else "")


def parse_pb(src):
    """Definition name -> (description, {field: description}) for every k8s-pb message."""
    types = {}
    for dirpath, _, files in os.walk(src):
        if "mod.rs" not in files or os.path.relpath(dirpath, src) == ".":
            continue
        module = os.path.relpath(dirpath, src).replace(os.sep, ".")
        if module.split(".")[0] not in PREFIXES:
            continue
        text = open(os.path.join(dirpath, "mod.rs"), encoding="utf-8").read()
        for m in STRUCT_RE.finditer(text):
            fields = {f.group(2): fmt_raw_doc(doc_lines(f.group(1), 4)) for f in FIELD_RE.finditer(m.group(3))}
            types[f"{definition_prefix(module)}.{m.group(2)}"] = (fmt_raw_doc(doc_lines(m.group(1), 0)), fields)
    return types


def parse_openapi_descriptions(src):
    """Definition name -> k8s-openapi's top-level description (a JSON string literal)."""
    found = {}
    for dirpath, _, files in os.walk(os.path.join(src, OPENAPI_VERSION)):
        for fname in files:
            text = open(os.path.join(dirpath, fname), encoding="utf-8").read()
            name = re.search(r'fn schema_name\(\)[^{]*\{\s*"([^"]+)"', text)
            desc = re.search(r'json_schema!\(\{\s*"description": "((?:[^"\\]|\\.)*)"', text)
            if name and desc:
                found[name.group(1)] = desc.group(1).encode().decode("unicode_escape").encode("latin-1").decode()
    return found


def openapi_lists(src):
    """Definition names of the `<Kind>List` types k8s-openapi (v1_36) serves."""
    found = set()
    for dirpath, _, files in os.walk(os.path.join(src, OPENAPI_VERSION)):
        for fname in files:
            text = open(os.path.join(dirpath, fname), encoding="utf-8").read()
            name = re.search(r'fn schema_name\(\)[^{]*\{\s*"([^"]+)"', text)
            if name and "const LIST_KIND" in text:
                found.add(name.group(1) + "List")
    return found


def version_rank(version):
    """kube's version priority: GA over beta over alpha, then the higher number."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))


def borrowed(name, types):
    """A list k8s-pb lacks (a version newer than it) documented as the same kind's list in the
    group's highest other version: kube copies the doc comments between versions."""
    group, _, kind = name.rpartition(".")
    group = group.rpartition(".")[0]
    candidates = [n for n in types if n.rpartition(".")[2] == kind and n.rpartition(".")[0].rpartition(".")[0] == group]
    candidates.sort(key=lambda n: version_rank(n.rpartition(".")[0].rpartition(".")[2]), reverse=True)
    return candidates[0] if candidates else None


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def main():
    check = "--check" in sys.argv[1:]
    pkgs = package_dirs()
    types = parse_pb(pkgs["k8s-pb"][1])

    reference = parse_openapi_descriptions(pkgs["k8s-openapi"][1])
    both = [n for n in reference if n in types]
    same = sum(1 for n in both if types[n][0] == reference[n])
    print(f"formatting check: {same} of {len(both)} shared type descriptions equal k8s-openapi's", file=sys.stderr)

    documented = {n for n, (_, fields) in types.items()
                  if n.endswith("List") and "items" in fields and "metadata" in fields}
    sources = {n: n for n in documented}
    for name in sorted(openapi_lists(pkgs["k8s-openapi"][1]) - documented):
        source = borrowed(name, documented)
        if source:
            sources[name] = source
        else:
            print(f"no documentation for {name}", file=sys.stderr)
    rows = []
    for name in sorted(sources):
        desc, fields = types[sources[name]]
        rows.append(f"    ({rust_str(name)}, {rust_str(desc)}, {rust_str(fields['items'])}, "
                    f"{rust_str(fields['metadata'])}),")
    out = "\n".join([
        f"// Generated by scripts/gen-openapi-list-docs.py from k8s-pb {pkgs['k8s-pb'][0]}. Do not edit.",
        "",
        "/// (list definition, its description, `items`' description, `metadata`'s description).",
        "pub(crate) static LIST_DOCS: &[(&str, &str, &str, &str)] = &[",
        *rows,
        "];",
        "",
    ])
    if check:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != out:
            sys.exit(f"{OUT} is stale: run scripts/gen-openapi-list-docs.py")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(out)
    print(f"wrote {len(rows)} list definitions to {os.path.relpath(OUT, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
