"""`/mcp`: the MCP server over streamable HTTP, inside the Django app.

The web app is WSGI (gunicorn's threads in deploy/, runserver and the tests' live server), so the SDK's ASGI app
cannot be mounted beside the pages. Each POST is instead answered whole by the SDK's own streamable HTTP transport in
stateless JSON mode, run to completion on an event loop of the request's thread: one JSON-RPC message in, one JSON
answer out, no session to keep between requests, so it runs the same under every server the app runs under, and
any worker may answer any request. What stateless JSON mode gives up is what this server has no use for: a stream of
notifications (GET), resumable sessions and requests from the server to the client; GET and DELETE answer 405,
as the protocol allows a server that offers no stream.
"""

import anyio
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from reviewer.mcp.principal import NotAuthenticated, acting_as, mcp_principal
from reviewer.mcp.server import server


def _refused(status: int, detail: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


@csrf_exempt  # no cookie signs a call in: each names its token
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _refused(405, "POST a JSON-RPC message: this server keeps no stream open", Allow="POST")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    try:
        principal = mcp_principal(token) if scheme.lower() == "bearer" and token else None
    except NotAuthenticated as exc:  # a live token whose person left the org: as the API answers it
        return _refused(403, str(exc))
    if principal is None:
        return _refused(401, "an Authorization: Bearer <Tollgate token> header is needed", **{
            "WWW-Authenticate": 'Bearer realm="tollgate"'})  # fmt: skip
    try:
        body = request.body
    except RequestDataTooBig:
        return _refused(413, "the request body is over MAX_REQUEST_BYTES")
    with acting_as(lambda: principal):  # the request is one call: its principal is the one read now
        status, headers, answer = anyio.run(_answered, _scope(request), body)
    response = HttpResponse(answer, status=status)
    for name, value in headers:
        if name.lower() not in ("content-length", "connection"):
            response[name] = value
    return response


def _scope(request: HttpRequest) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "server": (request.get_host(), int(request.get_port())),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _answered(scope: dict, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run one request through a fresh stateless manager (a manager runs once), collecting its answer."""
    # The manager serves the low-level server under the MCPServer, as the SDK's own streamable_http_app does.
    manager = StreamableHTTPSessionManager(app=server._lowlevel_server, json_response=True, stateless=True)
    answered = anyio.Event()
    sent_body = False
    start: dict = {}
    chunks: list[bytes] = []

    async def receive() -> dict:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client stays connected until its answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in start.get("headers", [])]
    return start.get("status", 500), headers, b"".join(chunks)
