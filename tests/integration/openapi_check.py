"""Checks HTTP exchanges against docs/openapi.yaml, so the document cannot drift from the code.

check(resp) asserts that the status is declared for the route and method, that the
content type is one the document names for that status, and that a JSON body matches
its schema; for a success it also checks the request: its query parameters are
declared and its JSON body matches the request schema. A path the document does not
describe must have been answered with a 404 or 405 error body.

HEAD is GET without the body (RFC 9110): its status and headers are checked against
the GET operation, and it must have no body. OPTIONS is answered by the router for
every path: 204 with an `Allow` header and no body for a known path, else 404.
"""
import json
import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

import jsonschema
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "../..")
DOC_PATH = os.path.join(ROOT, "docs/openapi.yaml")
ROUTES_PATH = os.path.join(ROOT, "daemon/api/routes.c")
METHODS = ("get", "put", "post", "delete")


def load_doc():
    with open(DOC_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


DOC = load_doc()
_RESOLVER = jsonschema.RefResolver.from_schema(DOC)


def _compile(template):
    parts = re.split(r"(\{[^}/]+\})", template)
    rx = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile("^" + rx + "$")


_PATHS = [(_compile(t), t, item) for t, item in DOC["paths"].items()]


def schema_errors(schema, value):
    """The validation errors of value against a schema of the document (its $refs resolved)."""
    v = jsonschema.Draft202012Validator(schema, resolver=_RESOLVER)
    return sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))


def assert_valid(schema, value, what):
    errs = schema_errors(schema, value)
    if errs:
        e = errs[0]
        where = "/".join(str(p) for p in e.absolute_path)
        raise AssertionError(f"{what}: {len(errs)} schema error(s); first at /{where}: {e.message}")


def deref(obj):
    """obj, or what its $ref names (responses and parameters may be references)."""
    while isinstance(obj, dict) and "$ref" in obj:
        node = DOC
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
    return obj


def component(name):
    """A schema of components/schemas, as a $ref the resolver follows."""
    return {"$ref": f"#/components/schemas/{name}"}


def find(method, path):
    """(template, operation) for a request, (template, None) for a known path but another
    method, or (None, None)."""
    known = None
    for rx, template, item in _PATHS:
        if rx.match(path):
            op = item.get(method.lower())
            if op is not None:
                return template, op
            known = template
    return known, None


def _media(content_type):
    return (content_type or "").split(";")[0].strip().lower()


def check(resp, streamed=False):
    """Asserts that resp (a requests.Response) is what the document promises."""
    req = resp.request
    url = urlsplit(req.url)
    path = unquote(url.path, errors="replace")
    method = req.method
    status = resp.status_code
    what = f"{method} {url.path} -> {status}"
    head = method == "HEAD"
    template, op = find("GET" if head else method, path)
    media = _media(resp.headers.get("Content-Type"))
    if head:
        assert resp.content == b"", f"{what}: a HEAD reply has no body"

    if method == "OPTIONS" and template:
        # The router answers OPTIONS for every path: components/responses/Options.
        assert status == 204, f"{what}: OPTIONS of a known path answers 204"
        assert resp.content == b"", f"{what}: a 204 reply has no body"
        for name, header in DOC["components"]["responses"]["Options"]["headers"].items():
            assert name in resp.headers, f"{what}: header {name} is missing"
        allow = {m.strip() for m in resp.headers["Allow"].split(",")}
        assert "OPTIONS" in allow, f"{what}: Allow is {resp.headers['Allow']!r}"
        return

    if op is None:
        # Outside the document: only the router's own refusals may answer.
        expected = 405 if template else 404
        assert status in (expected, 401), f"{what}: undocumented route answered"
        assert media == "application/json", f"{what}: content type {media}"
        if not head:
            assert_valid(component("Error"), resp.json(), what)
        return

    responses = op["responses"]
    declared = deref(responses.get(str(status)) or responses.get(status))
    assert declared is not None, (
        f"{what}: status {status} is not declared for {method} {template} "
        f"(declared: {', '.join(str(k) for k in responses)})")
    content = declared.get("content", {})
    assert media in content, f"{what}: content type {media!r} is not one of {list(content)}"
    for name, header in declared.get("headers", {}).items():
        if deref(header).get("required"):
            assert name in resp.headers, f"{what}: header {name} is missing"
    if not head and not streamed and media == "application/json":
        schema = content[media].get("schema")
        if schema:
            assert_valid(schema, resp.json(), what)

    if 200 <= status < 300:
        _check_request(op, req, url, what)


def _check_request(op, req, url, what):
    params = set()
    for p in op.get("parameters", []) + _path_item_params(op):
        p = deref(p)
        if p.get("in") == "query":
            params.add(p["name"])
    for key, _ in parse_qsl(url.query, keep_blank_values=True):
        assert key in params, f"{what}: query parameter {key} is not declared"
    body = op.get("requestBody")
    if body and req.body:
        raw = req.body.decode() if isinstance(req.body, bytes) else req.body
        if not isinstance(raw, str):
            return  # a generator (chunked upload): nothing to read back
        schema = body["content"]["application/json"]["schema"]
        assert_valid(schema, json.loads(raw), what + " (request body)")


def _path_item_params(op):
    for _, _, item in _PATHS:
        if any(item.get(m) is op for m in METHODS):
            return item.get("parameters", [])
    return []


def routes():
    """The route table of daemon/api/routes.c: [(method, pattern, role, flags, query names)]."""
    with open(ROUTES_PATH, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("api_routes[] = {"):]
    table = table[:table.index("\n};")]
    entry = re.compile(r'\{\s*"(\w+)",\s*"([^"]+)",\s*(\w+),\s*(AUTH_\w+),\s*([\w|]+),\s*'
                       r'(NULL|"[^"]*"),\s*(NULL|&\w+)\s*\}', re.S)
    out = []
    for m in entry.finditer(table):
        query = [] if m.group(6) == "NULL" else m.group(6).strip('"').split(",")
        out.append((m.group(1), m.group(2), m.group(4), m.group(5), query))
    return out
