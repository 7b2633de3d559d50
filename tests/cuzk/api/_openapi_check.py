"""Every response a test sees is checked against the served OpenAPI document.

The document is generated from ``cuzk.protocol``; checking each response against it keeps the
protocol module, the document and the server's actual answers the same thing. A status a
documented route does not list is an error too.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from starlette.routing import Match


class OpenApiChecker:
    def __init__(self, document: dict[str, Any], routes: list[Any]) -> None:
        self.document = document
        self.routes = routes
        self.checked = 0

    def _template(self, method: str, path: str) -> str | None:
        scope = {"type": "http", "path": path, "method": method}
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route.path
        return None

    def _validate(self, instance: Any, schema: dict[str, Any], what: str) -> None:
        root = {**schema, "components": self.document["components"]}
        errors = sorted(Draft202012Validator(root).iter_errors(instance), key=str)
        assert not errors, f"{what} does not match the OpenAPI document: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}" for e in errors[:5])

    def check(self, response: Any) -> None:
        request = response.request
        method, path, status = request.method, request.url.path, response.status_code
        what = f"{method} {path} -> {status}"
        media = response.headers.get("content-type", "").split(";")[0].strip()
        template = self._template(method, path)
        operation = self.document["paths"].get(template or "", {}).get(method.lower())
        if operation is None:  # no such route or method: still a JSON error that says why
            assert status >= 400, what
            self._validate(response.json(), {"$ref": "#/components/schemas/Error"}, what)
            self.checked += 1
            return
        reply = operation["responses"].get(str(status))
        assert reply is not None, f"{what}: status not documented for {method} {template}"
        content = reply.get("content", {})
        assert media in content, f"{what}: {media!r} not documented ({sorted(content)})"
        if media == "application/json":
            self._validate(response.json(), content[media]["schema"], what)
        self.checked += 1
