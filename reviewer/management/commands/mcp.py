"""`manage.py mcp`: the MCP server over stdio, for a coding agent on the same machine as Tollgate's database (the
agent's MCP client starts this command and speaks JSON-RPC on its stdin and stdout). It acts as the token in
TOLLGATE_TOKEN: an org's API key, or a person's token. The token is checked at start (a bad one ends it at once with a
message on stderr, before a client could mistake it for a server with nothing to show) and read again at each call,
so a token revoked, or a person's role taken away, while the server runs is gone from its next call. It lives on the
people side because the queue does."""

import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from reviewer.mcp.principal import NotAuthenticated, acting_as, mcp_principal
from reviewer.mcp.server import server


class Command(BaseCommand):
    help = "Serve Tollgate's MCP tools on stdin and stdout, as the token in TOLLGATE_TOKEN."

    def handle(self, *args, **options) -> None:
        token = os.environ.get("TOLLGATE_TOKEN", "")
        if not token:
            raise CommandError(
                "TOLLGATE_TOKEN is not set: give the org API key (tg_...) or the personal token (tg_pat_...) this "
                "server acts as"
            )
        try:
            principal = mcp_principal(token)
        except NotAuthenticated as exc:
            raise CommandError(f"TOLLGATE_TOKEN is refused: {exc}") from None
        if principal is None:
            raise CommandError("TOLLGATE_TOKEN is not a live Tollgate token (unknown, revoked or expired)")
        with acting_as(lambda: mcp_principal(token)):
            anyio.run(server.run_stdio_async)
