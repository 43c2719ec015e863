#!/usr/bin/env python3
"""Regenerates the prometheus-operator fixtures: each CRD from
/work/shared/reference/crds/prometheus-operator/*.yaml as compact JSON, with the string
`description` keywords of schemas dropped (they carry no validation weight outside the logic
junctors, where these CRDs have none) to keep the fixtures small."""
import glob, json, os, yaml

class Loader(yaml.SafeLoader):
    pass

# YAML 1.1's `=` value tag, used by one enum; Go's YAML reads it as the string "=".
Loader.add_constructor('tag:yaml.org,2002:value', lambda l, n: l.construct_scalar(n))

def strip(schema):
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == 'description' and isinstance(v, str):
                continue
            if k in ('properties', 'patternProperties', 'definitions', 'dependencies'):
                out[k] = {pk: strip(pv) for pk, pv in v.items()}
            elif k in ('items', 'additionalProperties', 'not', 'additionalItems'):
                out[k] = strip(v)
            elif k in ('allOf', 'anyOf', 'oneOf'):
                out[k] = [strip(x) for x in v]
            else:
                out[k] = v
        return out
    if isinstance(schema, list):
        return [strip(x) for x in schema]
    return schema

here = os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob('/work/shared/reference/crds/prometheus-operator/*.yaml')):
    crd = next(d for d in yaml.load_all(open(f), Loader=Loader) if d)
    for v in crd['spec']['versions']:
        v['schema']['openAPIV3Schema'] = strip(v['schema']['openAPIV3Schema'])
    name = os.path.basename(f).replace('.yaml', '.json')
    with open(os.path.join(here, name), 'w') as out:
        json.dump(crd, out, separators=(',', ':'))
