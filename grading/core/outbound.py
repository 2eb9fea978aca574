"""The one HTTP client for requests to addresses that users give Tollgate (webhooks today, any callback later).

Whoever holds an org's API key chooses a callback URL, so an unguarded client reaches whatever the worker can
reach: the app itself, Redis on loopback, the private network, a cloud's metadata service. Every request here:

1. refuses a URL that is not http(s), names no host or carries credentials;
2. resolves the host once and refuses it if any address it resolves to is loopback, private, link-local, CGNAT,
   multicast, unspecified, reserved or documentation space, in IPv4 or IPv6, including IPv6 forms that embed an
   IPv4 address (mapped, compatible, NAT64, 6to4), unless `OUTBOUND_ALLOWED_NETWORKS` names it. Numeric hosts in
   the legacy forms (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`) are read as the address they denote;
3. connects to the address it checked, keeping the name for the Host header and TLS (SNI and certificate), so a
   DNS answer that changes between the check and the connection cannot move the request;
4. never follows a redirect: a 3xx is an answer like any other and the caller decides what it means;
5. ends at one deadline for the whole try (resolution, connect, TLS, sending, every read). Socket timeouts are
   per operation, so a peer sending one header line every few seconds would never trip them; a watchdog cuts
   the connection when the deadline passes, whatever the request is doing;
6. reads at most `max_response_bytes` of the response body.
"""

import contextlib
import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024
USER_AGENT = "Tollgate/1"


class OutboundError(Exception):
    """A try that did not get an answer. `permanent`: trying the same request again cannot succeed."""

    permanent = False


class Refused(OutboundError):
    """The URL, or an address its host resolves to, may not be requested. Nothing was sent."""

    permanent = True


class DeadlineExceeded(OutboundError):
    """The try did not finish within its total deadline."""


class NetworkError(OutboundError):
    """The host could not be resolved or reached, or the connection broke."""


class ResponseTooLarge(OutboundError):
    """The receiver answered with more than the client reads; it would do the same again."""

    permanent = True

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class OutboundResponse:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes


# Everything that is not one public host on the internet, by the IANA special-purpose registries.
_REFUSED_IPV4 = [
    (ipaddress.ip_network(cidr), label)
    for cidr, label in [
        ("0.0.0.0/8", "unspecified ('this network')"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved for IETF protocol assignments"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "the deprecated 6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved for benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    ]
]
_REFUSED_IPV6 = [
    (ipaddress.ip_network(cidr), label)
    for cidr, label in [
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "reserved for IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved for SRv6 segment identifiers"),
        ("fc00::/7", "unique local (private)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    ]
]
_GLOBAL_UNICAST_IPV6 = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Digits, hex digits, `x` and dots: what the legacy inet_aton forms are made of (a name has other letters).
_LEGACY_IPV4 = re.compile(r"[0-9a-fA-FxX.]+")


def address_refusal(address: Address, *, allowed: Iterable[Network] = ()) -> str | None:
    """What makes `address` refused, to follow "is" in a sentence ("loopback"), or None when it may be reached.
    Addresses in `allowed` networks pass whatever they are."""
    allowed = list(allowed)
    if any(address in network for network in allowed):
        return None
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        # Connecting to these reaches the IPv4 address inside (a mapped address is that address; NAT64 and
        # 6to4 gateways forward to it), so the IPv4 address is what is judged.
        reason = address_refusal(embedded, allowed=allowed)
        return f"an IPv6 form of {embedded}, {reason}" if reason else None
    refused = _REFUSED_IPV4 if address.version == 4 else _REFUSED_IPV6
    for network, label in refused:
        if address in network:
            return label
    if address.version == 6 and address not in _GLOBAL_UNICAST_IPV6:
        return "reserved (outside IPv6 global unicast)"
    return None


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    if address.version == 4:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def literal_address(host: str) -> Address | None:
    """The address a URL's host denotes without DNS: an IP literal, in any form a resolver reads as one."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def allowed_networks() -> list[Network]:
    """OUTBOUND_ALLOWED_NETWORKS (networks, or CIDR strings where a test sets them)."""
    return [ipaddress.ip_network(network) for network in settings.OUTBOUND_ALLOWED_NETWORKS]


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # ASCII (IDNA), no brackets
    port: int
    host_header: str
    path: str


def _target(url: str) -> _Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"only http and https URLs are requested, not {parts.scheme or 'no scheme'}")
    if "@" in parts.netloc:
        raise Refused("the URL carries credentials (user:password@); put a secret in a header or the path instead")
    if not parts.hostname:
        raise Refused("the URL names no host")
    try:
        host = parts.hostname if parts.hostname.isascii() else parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise Refused(f"the host {parts.hostname!r} is not a valid internationalised name") from None
    default_port = 443 if parts.scheme == "https" else 80
    port = port or default_port
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == default_port else f"{shown}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(parts.scheme, host, port, host_header, path)


def url_refusal(url: str) -> str | None:
    """Why `url` can never be requested, judged without DNS (scheme, credentials, a literal address in a refused
    range); None when it may be tried. A host name is checked when a request is made: DNS answers change."""
    try:
        target = _target(url)
    except Refused as exc:
        return str(exc)
    address = literal_address(target.host)
    if address is None:
        return None
    reason = address_refusal(address, allowed=allowed_networks())
    return f"the address {address} is {reason}" if reason else None


def outbound_request(
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | None = None,
    deadline_seconds: float,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> OutboundResponse:
    """One try at `method url`, guarded as the module says. Raises an OutboundError when no answer came back."""
    deadline = time.monotonic() + deadline_seconds
    target = _target(url)
    allowed = allowed_networks()
    addresses = _resolve(target.host, target.port, deadline=deadline, seconds=deadline_seconds)
    for address in addresses:
        reason = address_refusal(address, allowed=allowed)
        if reason:
            if literal_address(target.host) is not None:
                raise Refused(f"the address {address} is {reason}: nothing sent")
            raise Refused(f"{target.host} resolves to {address}, which is {reason}: nothing sent")
    watchdog = _Watchdog(deadline)
    try:
        sock = _connect(target, addresses, deadline=deadline, watchdog=watchdog)
        connection = _PinnedConnection(target.host, target.port, sock=sock)
        response = None
        try:
            connection.request(
                method,
                target.path,
                body=body,
                headers={"User-Agent": USER_AGENT, **headers, "Host": target.host_header},
            )
            response = connection.getresponse()
            length = response.getheader("Content-Length", "")
            if length.isdigit() and int(length) > max_response_bytes:
                raise ResponseTooLarge(_too_large(length, max_response_bytes), status=response.status)
            content = response.read(max_response_bytes + 1)
            if len(content) > max_response_bytes:
                raise ResponseTooLarge(_too_large("more", max_response_bytes), status=response.status)
            answer = OutboundResponse(
                response.status, {name.lower(): value for name, value in response.getheaders()}, content
            )
        finally:
            watchdog.release()
            if response is not None:
                response.close()  # it owns the socket when the answer is read until the connection closes
            connection.close()
    except (OSError, http.client.HTTPException) as exc:
        if watchdog.fired or time.monotonic() >= deadline:
            raise DeadlineExceeded(_late(deadline_seconds)) from None
        raise NetworkError(f"{type(exc).__name__}: {exc}") from None
    finally:
        watchdog.stop()
    if watchdog.fired:  # a body read until the connection closes ends "normally" when the watchdog cuts it
        raise DeadlineExceeded(_late(deadline_seconds))
    return answer


def _late(seconds: float) -> str:
    return f"no complete answer within the total deadline of {seconds:g} s"


def _too_large(length: str, cap: int) -> str:
    return f"the response body ({length} bytes) is larger than the {cap:,} bytes read"


def _resolve(host: str, port: int, *, deadline: float, seconds: float) -> list[Address]:
    """The host's addresses, within the deadline (a resolver can take far longer than a request may)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    answer: dict[str, object] = {}

    def lookup() -> None:
        try:
            answer["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            answer["error"] = exc

    resolver = threading.Thread(target=lookup, name="outbound-resolve", daemon=True)
    resolver.start()
    resolver.join(max(0.0, deadline - time.monotonic()))
    if resolver.is_alive():
        raise DeadlineExceeded(f"resolving {host} took longer than the {seconds:g} s deadline")
    if "error" in answer:
        raise NetworkError(f"{host} could not be resolved: {answer['error']}")
    addresses: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in answer["infos"]:
        address = ipaddress.ip_address(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise NetworkError(f"{host} resolves to no address")
    return addresses


def _connect(target: _Target, addresses: list[Address], *, deadline: float, watchdog: "_Watchdog") -> socket.socket:
    """A connected socket (TLS for https) to the first of the checked addresses that answers."""
    failure: OSError | None = None
    for address in addresses:
        # A mapped address is the IPv4 host: connect to it as such (an IPv6-only socket could not).
        connect_to = address.ipv4_mapped if address.version == 6 and address.ipv4_mapped else address
        family = socket.AF_INET if connect_to.version == 4 else socket.AF_INET6
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            watchdog.watch(sock)
            sock.settimeout(_remaining(deadline))
            sock.connect((str(connect_to), target.port))
            if target.scheme == "https":
                # Handshake after the watchdog holds the TLS socket, so a handshake dribbled out is cut too.
                sock = _tls_context().wrap_socket(sock, server_hostname=target.host, do_handshake_on_connect=False)
                watchdog.watch(sock)
                sock.do_handshake()
            return sock
        except OSError as exc:
            watchdog.release()
            sock.close()
            failure = exc
            if watchdog.fired:
                break
    raise failure or OSError("no address to connect to")


def _remaining(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the deadline passed")
    return remaining


@cache
def _tls_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle costs tens of milliseconds of CPU.
    return ssl.create_default_context()


class _PinnedConnection(http.client.HTTPConnection):
    """http.client over a socket already connected to the checked address; it never opens one itself."""

    def __init__(self, host: str, port: int, *, sock: socket.socket) -> None:
        super().__init__(host, port)
        self.sock = sock

    def connect(self) -> None:
        raise http.client.NotConnected("a pinned connection is opened once, to the checked address")


class _Watchdog:
    """Shuts the watched socket down when the deadline passes, which wakes any blocked read or write."""

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.fired:
                raise TimeoutError("the deadline passed")
            self._sock = sock

    def release(self) -> None:
        """Stop watching the socket, so closing it is safe (its descriptor may be reused at once)."""
        with self._lock:
            self._sock = None

    def stop(self) -> None:
        self._timer.cancel()
        self.release()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop the TLS object under
                # the thread reading through it. Not connected yet: the connect timeout ends that.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
