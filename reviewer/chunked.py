"""Request bodies sent chunked (`Transfer-Encoding: chunked`, no `Content-Length`), as JavaScript's OTLP exporters
send them. Django reads a body only as far as CONTENT_LENGTH says, so without one a chunked body reads as empty:
an OTLP export was answered 200 with nothing stored. This WSGI wrapper hands Django the body and its length.

Gunicorn decodes chunked bodies and says so (`wsgi.input_terminated`): the body is read from its input, up to
one byte over MAX_REQUEST_BYTES, so that Django's own limit answers 413 to a longer one. A server that does not
(Django's runserver) gets 411 with what to do, rather than an empty body taken for a request.
"""

import io
from collections.abc import Callable, Iterable

from django.conf import settings

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]


def chunked_bodies(app: WSGIApp) -> WSGIApp:
    def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if not _chunked(environ):
            return app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            message = (
                b"this server does not read chunked request bodies: send Content-Length, or run Tollgate under "
                b"gunicorn (`gunicorn reviewer.wsgi`)\n"
            )
            start_response(
                "411 Length Required", [("Content-Type", "text/plain"), ("Content-Length", str(len(message)))]
            )
            return [message]
        body = _read(environ["wsgi.input"], settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
        return app({**environ, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}, start_response)

    return application


def _chunked(environ: dict) -> bool:
    encoding = environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    return "chunked" in encoding and not environ.get("CONTENT_LENGTH")


def _read(stream: io.RawIOBase, most: int) -> bytes:
    chunks, size = [], 0
    while size < most:
        chunk = stream.read(min(65536, most - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
