"""The guarded outbound client on its own: what webhooks (tests/grading/drafts/test_webhooks.py) rely on."""

import socket
import threading

import pytest

from grading.core import outbound


def post(url: str, **kwargs) -> outbound.OutboundResponse:
    return outbound.outbound_request(
        method="POST", url=url, headers={"Content-Type": "application/json"}, body=b"{}", deadline_seconds=5, **kwargs
    )


def test_it_connects_to_the_address_it_checked_and_not_to_a_later_dns_answer(receiver, settings, monkeypatch):
    """DNS rebinding: the name resolves to an allowed address when checked, then to a refused one. The request
    goes to the checked address, once, with the name in its Host header."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    checked, rebound = receiver([200]), receiver([200], host="127.0.0.2")
    answers = iter(["127.0.0.1", "127.0.0.2", "127.0.0.2"])
    real_getaddrinfo = socket.getaddrinfo

    def rebinding_dns(host, port, *args, **kwargs):
        if host == "hooks.rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)
    response = post(f"http://hooks.rebind.test:{checked.port}/hook")
    assert response.status == 200
    assert rebound.received == []
    [(headers, _)] = checked.received
    assert headers["host"] == f"hooks.rebind.test:{checked.port}"


def test_a_name_resolving_to_any_refused_address_is_refused(settings, monkeypatch):
    def mixed_dns(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", mixed_dns)
    with pytest.raises(outbound.Refused, match="hooks.mixed.test resolves to 10.0.0.7, which is private"):
        post("http://hooks.mixed.test/hook")


def test_a_resolver_that_hangs_ends_at_the_deadline(monkeypatch):
    release = threading.Event()

    def hanging_dns(*args, **kwargs):
        release.wait(30)
        raise socket.gaierror("never answered")

    monkeypatch.setattr(socket, "getaddrinfo", hanging_dns)
    try:
        with pytest.raises(outbound.DeadlineExceeded, match="resolving hooks.slow.test"):
            outbound.outbound_request(
                method="POST", url="http://hooks.slow.test/", headers={}, body=b"", deadline_seconds=0.5
            )
    finally:
        release.set()


def test_it_reads_no_more_of_the_answer_than_the_cap(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    sent = []

    def flood(declare_length: bool) -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            head = b"HTTP/1.1 200 OK\r\n" + (b"Content-Length: 10000000\r\n" if declare_length else b"") + b"\r\n"
            connection.sendall(head)
            try:
                for _ in range(10_000):
                    connection.sendall(b"x" * 1000)
            except OSError:
                pass
            sent.append(True)

    try:
        for declare_length in (True, False):
            server = threading.Thread(target=flood, args=(declare_length,), daemon=True)
            server.start()
            with pytest.raises(outbound.ResponseTooLarge) as refused:
                post(f"http://127.0.0.1:{port}/", max_response_bytes=4096)
            assert refused.value.status == 200
            server.join(10)
    finally:
        listener.close()
    assert len(sent) == 2


@pytest.mark.parametrize(
    "url",
    [
        "http://93.184.215.14/",
        "https://[2606:4700:4700::1111]/",
        "http://[::ffff:93.184.215.14]/",  # a public IPv4 address written as IPv6
        "http://[64:ff9b::5db8:d70e]/",  # NAT64 of a public address
        "https://hooks.example.com/tollgate",  # names are checked when sending
    ],
)
def test_public_addresses_and_names_may_be_tried(url):
    assert outbound.url_refusal(url) is None


def test_a_url_with_an_empty_userinfo_is_still_refused():
    assert "credentials" in outbound.url_refusal("http://@hooks.example.com/")
