#!/usr/bin/env python3
"""Generates libs/registry/src/omitempty_table.rs: how Go's encoding/json writes each served
built-in kind, as far as empty fields go.

kube serializes built-in objects from Go structs, so a field tagged `omitempty` disappears when
empty (nil or empty slice or map, "", 0, false, nil pointer) and one tagged `omitzero` when zero
(ObjectMeta.creationTimestamp), while a nil slice, map or pointer without `omitempty`, and a zero
`metav1.Time`, are written as `null`. kapi keeps JSON values, so the registry walks this table on
every write (libs/registry/src/omitempty.rs).

Source: kube's Go API types at a pinned release (the one kapi's /version names), read from the
git mirrors the `fetch` tool makes (github:kubernetes/api, apimachinery,
apiextensions-apiserver, kube-aggregator) with `git show <tag>:<path>`; nothing of their text is
copied, only the field facts below. The served kinds come from libs/registry/src/catalog/table.rs.

The table is per Go type (not per path): each type lists only the fields that matter to the
walk (omitempty/omitzero fields whose empty value Go drops, fields written as null when absent,
and fields leading to types that have such fields); embedded structs are inlined as Go inlines
them. Types with nothing to do are left out.

Usage: scripts/gen-omitempty.py [--check]   (--check: exit 1 if the committed file differs)
Environment: KAPI_GO_MIRRORS (default /work/.mirror) holds the <owner>+<name>/repo git dirs.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "libs", "registry", "src", "omitempty_table.rs")
CATALOG = os.path.join(ROOT, "libs", "registry", "src", "catalog", "table.rs")
MIRRORS = os.environ.get("KAPI_GO_MIRRORS", "/work/.mirror")

# Go module -> (mirror, tag): kube 1.36's staging modules.
MODULES = {
    "k8s.io/api": ("kubernetes+api", "v0.36.3"),
    "k8s.io/apimachinery": ("kubernetes+apimachinery", "v0.36.3"),
    "k8s.io/apiextensions-apiserver": ("kubernetes+apiextensions-apiserver", "v0.36.3"),
    "k8s.io/kube-aggregator": ("kubernetes+kube-aggregator", "v0.36.2"),
}

# Groups whose types live outside k8s.io/api.
GROUP_PACKAGES = {
    "apiextensions.k8s.io": "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions",
    "apiregistration.k8s.io": "k8s.io/kube-aggregator/pkg/apis/apiregistration",
}

META = "k8s.io/apimachinery/pkg/apis/meta/v1"
APIEXT = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

# Structs with their own MarshalJSON, by what their zero value marshals to:
# - NULL: `null` (a zero Time; RawExtension and apiextensions' JSON with no bytes). omitempty
#   never drops a struct, so these are written as null when absent unless tagged omitzero.
# - OPAQUE: a scalar or raw JSON (Quantity, IntOrString, Duration, FieldsV1): kept as given.
# - SCHEMA: apiextensions' JSONSchemaPropsOr{Array,Bool,StringArray}: a schema, a list of
#   schemas, or a bool/list of strings; walked as JSONSchemaProps where it holds objects.
SPECIAL = {
    (META, "Time"): "NULL",
    (META, "MicroTime"): "NULL",
    (META, "Duration"): "OPAQUE",
    (META, "FieldsV1"): "OPAQUE",
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "OPAQUE",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "OPAQUE",
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): "NULL",
    (APIEXT, "JSON"): "NULL",
    (APIEXT, "JSONSchemaPropsOrArray"): "SCHEMA",
    (APIEXT, "JSONSchemaPropsOrBool"): "SCHEMA",
    (APIEXT, "JSONSchemaPropsOrStringArray"): "SCHEMA",
}

BASIC = {
    "string": "Str",
    "bool": "Bool",
    "byte": "Int",
    "float32": "Int",
    "float64": "Int",
}
for _n in ("int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64"):
    BASIC[_n] = "Int"


# kapi serves a few versions newer than its release (certificates.k8s.io/v1 ClusterTrustBundle and
# PodCertificateRequest, v1 after kube 1.36): their packages are read at this k8s.io/api commit
# (master of 2026-07-24) instead.
NEWER_TAG = "10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2"


def git_show(module, path, tag=None):
    mirror, pinned = MODULES[module]
    tag = tag or pinned
    gitdir = os.path.join(MIRRORS, mirror, "repo")
    if not os.path.isdir(gitdir):
        sys.exit(f"{gitdir} missing: fetch github:kubernetes/{mirror.split('+')[1]} first")
    return subprocess.run(["git", "-C", gitdir, "show", f"{tag}:{path}"], check=True, capture_output=True, text=True).stdout


def split_module(pkg):
    for module in MODULES:
        if pkg == module or pkg.startswith(module + "/"):
            return module, pkg[len(module) + 1 :]
    return None, None


def package_files(pkg):
    """The non-test, non-generated Go files of a package (`path@tag` for another tag)."""
    pkg, _, tag = pkg.partition("@")
    module, sub = split_module(pkg)
    if module is None:
        return []
    mirror, pinned = MODULES[module]
    tag = tag or pinned
    gitdir = os.path.join(MIRRORS, mirror, "repo")
    listing = subprocess.run(
        ["git", "-C", gitdir, "ls-tree", "--name-only", f"{tag}:{sub}" if sub else tag],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    files = [f for f in listing if f.endswith(".go") and not f.endswith("_test.go")
             and not f.startswith("zz_generated") and not f.startswith("generated")
             and "fuzz" not in f and "swagger" not in f]
    return [git_show(module, f"{sub}/{f}" if sub else f, tag) for f in files]


class Package:
    """The named types of one Go package: structs as field lists, other types as expressions."""

    def __init__(self, path):
        self.path = path
        self.structs = {}  # name -> [(go name, type expr, tag)]
        self.named = {}  # name -> type expr
        for text in package_files(path):
            self.parse(text)

    def parse(self, text):
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        lines = [strip_comment(l) for l in text.split("\n")]
        imports = {}
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("import ("):
                i += 1
                while lines[i].strip() != ")":
                    self.add_import(imports, lines[i].strip())
                    i += 1
            elif line.startswith("import "):
                self.add_import(imports, line[len("import "):])
            elif line == "type (":
                sys.exit(f"{self.path}: grouped type declarations are not handled")
            elif m := re.match(r"^type (\w+) struct\s*\{\s*\}?$", lines[i]):
                name, fields = m.group(1), []
                if not line.endswith("}"):
                    i += 1
                    depth = 1
                    while True:
                        l = lines[i].strip()
                        if l == "}" and depth == 1:
                            break
                        if l.endswith("{"):
                            sys.exit(f"{self.path}: nested struct in {name}: {l}")
                        if l:
                            fields.append(parse_field(l, self.path, name))
                        i += 1
                self.structs[name] = [(n, qualify(t, imports, self.path), tag) for n, t, tag in fields]
            elif m := re.match(r"^type (\w+) =? ?(.+?)\s*$", lines[i]):
                if not m.group(2).startswith(("interface", "func")):
                    self.named[m.group(1)] = qualify(m.group(2), imports, self.path)
            i += 1

    @staticmethod
    def add_import(imports, spec):
        m = re.match(r'^(?:(\w+)\s+)?"([^"]+)"$', spec)
        if m:
            imports[m.group(1) or m.group(2).rsplit("/", 1)[-1]] = m.group(2)


def strip_comment(line):
    """The line without its `//` comment (a struct tag holds no `//`; a comment may hold backticks)."""
    if line.strip().startswith("//"):
        return ""
    tag_end = line.rfind("`") if line.count("`") >= 2 else -1
    cut = line.find("//", tag_end + 1)
    return line if cut < 0 else line[:cut]


def parse_field(line, pkg, struct):
    m = re.match(r"^(?:(\w+)\s+)?([^`\s]+)\s*(?:`(.*)`)?$", line)
    if not m:
        sys.exit(f"{pkg}.{struct}: cannot parse field line: {line}")
    return m.group(1), m.group(2), m.group(3) or ""


def qualify(expr, imports, pkg):
    """Rewrites `metav1.Time` as `{k8s.io/.../meta/v1}Time` and local names as `{pkg}Name`."""
    def repl(m):
        if m.group(1):
            return "{" + imports.get(m.group(1), m.group(1)) + "}" + m.group(2)
        if m.group(2) in BASIC or m.group(2) in ("map", "interface", "any", "error"):
            return m.group(2)
        return "{" + pkg + "}" + m.group(2)
    return re.sub(r"(?:(\w+)\.)?([A-Za-z_]\w*)", repl, expr)


PACKAGES = {}


def package(path):
    if path not in PACKAGES:
        PACKAGES[path] = Package(path)
    return PACKAGES[path]


def json_tag(tag):
    m = re.search(r'json:"([^"]*)"', tag)
    if not m:
        return None, set()
    parts = m.group(1).split(",")
    return parts[0], set(parts[1:])


class Types:
    """Go types resolved into the table's shapes; structs numbered as they are reached."""

    def __init__(self):
        self.index = {}  # (pkg, name) -> struct number
        self.structs = []  # [(pkg, name, [(json, omitempty, omitzero, shape)])]

    def shape(self, expr):
        """A shape: ("Str"|"Int"|"Bool"|"Bytes"|"Null"|"Opaque",) | ("S", n) | ("Schema", n)
        | ("L", shape) | ("M", shape) | ("P", shape)."""
        if expr.startswith("*"):
            return ("P", self.shape(expr[1:]))
        if expr == "[]byte":
            return ("Bytes",)
        if expr.startswith("[]"):
            return ("L", self.shape(expr[2:]))
        if expr.startswith("map["):
            depth, j = 0, 3
            while True:
                depth += {"[": 1, "]": -1}.get(expr[j], 0)
                if depth == 0:
                    break
                j += 1
            return ("M", self.shape(expr[j + 1 :]))
        if expr in BASIC:
            return (BASIC[expr],)
        if expr in ("interface{}", "any"):
            return ("Opaque",)
        m = re.match(r"^\{([^}]*)\}(\w+)$", expr)
        if not m:
            sys.exit(f"unsupported type expression {expr}")
        pkg, name = m.group(1), m.group(2)
        special = SPECIAL.get((pkg, name))
        if special == "NULL":
            return ("Null",)
        if special == "OPAQUE":
            return ("Opaque",)
        if special == "SCHEMA":
            return ("Schema", self.struct(APIEXT, "JSONSchemaProps"))
        p = package(pkg)
        if name in p.structs:
            return ("S", self.struct(pkg, name))
        if name in p.named:
            return self.shape(p.named[name])
        if pkg == "time" and name == "Duration":
            return ("Int",)
        sys.exit(f"unknown type {pkg}.{name}")

    def struct(self, pkg, name):
        key = (pkg, name)
        if key in self.index:
            return self.index[key]
        n = len(self.structs)
        self.index[key] = n
        self.structs.append((pkg, name, None))
        self.structs[n] = (pkg, name, self.fields(pkg, name))
        return n

    def fields(self, pkg, name):
        out = []
        for go_name, expr, tag in package(pkg).structs[name]:
            json_name, opts = json_tag(tag)
            if json_name == "-" and not opts:
                continue
            if go_name is None and not json_name:
                # Embedded without a JSON name: Go promotes its fields.
                inner = re.match(r"^\*?\{([^}]*)\}(\w+)$", expr)
                if not inner:
                    sys.exit(f"{pkg}.{name}: embedded {expr}")
                ipkg, iname = inner.group(1), inner.group(2)
                out.extend(self.fields(ipkg, iname))
                continue
            if go_name is None:
                go_name = re.sub(r"^\*?\{[^}]*\}", "", expr)
            if not go_name[0].isupper():
                continue
            out.append((json_name or go_name, "omitempty" in opts, "omitzero" in opts, self.shape(expr)))
        return out


def removable(shape):
    """Whether encoding/json's omitempty can drop a value of this shape."""
    return shape[0] in ("Str", "Int", "Bool", "Bytes", "L", "M", "P")


def null_when_absent(shape, omitempty, omitzero):
    """Whether Go writes `null` for this field when the client left it out."""
    if shape[0] in ("L", "M", "P"):
        return not omitempty
    return shape[0] == "Null" and not omitzero


def walks(shape, live):
    """Whether values of this shape contain structs the walk must visit."""
    kind = shape[0]
    if kind in ("S", "Schema"):
        return shape[1] in live
    if kind in ("L", "M", "P"):
        return walks(shape[1], live)
    return False


def prune(types):
    """The structs that have something to do, directly or below: a fixpoint."""
    live = set()
    while True:
        grown = False
        for n, (_, _, fields) in enumerate(types.structs):
            if n in live:
                continue
            for _, omitempty, omitzero, shape in fields:
                if (omitempty and removable(shape)) or omitzero or null_when_absent(shape, omitempty, omitzero) or walks(shape, live):
                    live.add(n)
                    grown = True
                    break
        if not grown:
            return live


def kept_fields(fields, live):
    return [f for f in fields
            if (f[1] and removable(f[3])) or f[2] or null_when_absent(f[3], f[1], f[2]) or walks(f[3], live)]


def rust_shape(shape, numbering):
    kind = shape[0]
    if kind in ("Str", "Int", "Bool", "Bytes", "Null", "Opaque"):
        return kind
    if kind == "S":
        return f"S({numbering[shape[1]]})" if shape[1] in numbering else "Opaque"
    if kind == "Schema":
        return f"Schema({numbering[shape[1]]})"
    return f"{kind}(&{rust_shape(shape[1], numbering)})"


def served_kinds():
    text = open(CATALOG, encoding="utf-8").read()
    kinds = []
    for m in re.finditer(r'ResourceSpec \{\s*group: "([^"]*)",\s*version: "([^"]*)",\s*resource: "[^"]*",\s*kind: "([^"]*)".*?serving: Serving::(\w+)', text, re.S):
        group, version, kind, serving = m.groups()
        if serving == "Stored" and (group, version, kind) not in kinds:
            kinds.append((group, version, kind))
    return kinds


def group_package(group, version):
    if group in GROUP_PACKAGES:
        return f"{GROUP_PACKAGES[group]}/{version}"
    return f"k8s.io/api/{group.split('.')[0] or 'core'}/{version}"


def short(pkg):
    return re.sub(r"^k8s\.io/(api/|apimachinery/pkg/apis/|apiextensions-apiserver/pkg/apis/|kube-aggregator/pkg/apis/)", "", pkg.split("@")[0])


def render():
    types = Types()
    meta = types.struct(META, "ObjectMeta")
    roots = []
    for g, v, k in served_kinds():
        pkg = group_package(g, v)
        if k not in package(pkg).structs:
            pkg = f"{pkg}@{NEWER_TAG}"
        roots.append((g, v, k, types.struct(pkg, k)))
    live = prune(types)
    order = sorted(live)
    numbering = {n: i for i, n in enumerate(order)}
    field_count = 0
    lines = [
        "//! Generated by scripts/gen-omitempty.py from kube's Go API types (k8s.io/api, apimachinery and",
        "//! apiextensions-apiserver v0.36.3, kube-aggregator v0.36.2; certificates.k8s.io/v1 kinds newer",
        f"//! than 1.36 from k8s.io/api {NEWER_TAG[:12]}): do not edit.",
        "//!",
        "//! Per Go struct, the fields that matter to [`super`]'s walk, as",
        "//! `f(json name, flags, shape)`: flags `E` omitempty, `Z` omitzero, `N` written as null when",
        "//! absent, `W` only walked; shapes as [`Shape`].",
        "",
        "use super::{Field, Shape::*, E, N, W, Z};",
        "",
        "const fn f(name: &'static str, flags: u8, shape: super::Shape) -> Field {",
        "    Field { name, flags, shape }",
        "}",
        "",
        f"/// `metav1.ObjectMeta`, for every object's `metadata` (custom resources' too).",
        f"pub(super) const OBJECT_META: u16 = {numbering[meta]};",
        "",
        "/// Every served built-in kind's struct: (group, version, kind, struct).",
        "pub(super) static KINDS: &[(&str, &str, &str, u16)] = &[",
    ]
    for g, v, k, n in roots:
        lines.append(f'    ("{g}", "{v}", "{k}", {numbering[n]}),')
    lines += ["];", "", "/// The structs, numbered as [`KINDS`] and the shapes refer to them.", "pub(super) static STRUCTS: &[&[Field]] = &["]
    for n in order:
        pkg, name, fields = types.structs[n]
        kept = kept_fields(fields, live)
        field_count += len(kept)
        rendered = []
        for json_name, omitempty, omitzero, shape in kept:
            flags = []
            if omitempty and removable(shape):
                flags.append("E")
            if omitzero:
                flags.append("Z")
            if null_when_absent(shape, omitempty, omitzero):
                flags.append("N")
            rendered.append(f'f("{json_name}", {"|".join(flags) or "W"}, {rust_shape(shape, numbering)})')
        lines.append(f"    // {numbering[n]} {short(pkg)}.{name}")
        lines.append("    &[" + ", ".join(rendered) + "],")
    lines.append("];")
    summary = f"{len(order)} structs, {field_count} fields, {len(roots)} kinds"
    lines.insert(3, f"//! {summary}.")
    return "\n".join(lines) + "\n", summary


def main():
    text, summary = render()
    if "--check" in sys.argv:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit(f"{OUT} is out of date: run scripts/gen-omitempty.py")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT}: {summary}")


if __name__ == "__main__":
    main()
