"""Tollgate as deploy/ documents it: Debian's nginx with deploy/nginx/tollgate.conf and a self-signed certificate, in
front of gunicorn with deploy/gunicorn.conf.py and the settings of deploy/tollgate.env.example, on the suite's
PostgreSQL and Redis. Only host names, addresses, ports and paths are changed, and each change must find what it
replaces: a test that quietly ran another configuration would prove nothing about the documented one.

nginx runs as the current user with its pid, logs and temporary files in the test's directory, on high ports of
127.0.0.1. Clients connect from other loopback addresses (the whole 127/8 is this machine) to be two people.
"""

import grp
import http.client
import os
import pwd
import re
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from django.conf import settings

from tests.builders.processes import REPO_ROOT, database_url, free_port, wait_until

DEPLOY = REPO_ROOT / "deploy"
HOST = "tollgate.test"


def _nginx() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if found is None or shutil.which("openssl") is None:
        reason = "nginx or openssl not found (apt-get install nginx openssl)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the deployment test (.ci/run installs nginx): {reason}")
        pytest.skip(reason)
    return found


def replaced(text: str, replacements: dict[str, str], *, name: str) -> str:
    for old, new in replacements.items():
        assert old in text, f"{name} no longer holds {old!r}: update this test with it"
        text = text.replace(old, new)
    return text


def documented_settings(path: Path) -> dict[str, str]:
    """KEY=value lines, read alike by systemd's EnvironmentFile and deploy/tollgate-manage (so: no quotes)."""
    found = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, equals, value = line.partition("=")
            assert equals and key == key.strip() and not set("\"'") & set(value), line
            found[key] = value
    return found


@dataclass
class Deployment:
    https_port: int
    http_port: int
    certificate: Path
    static_root: Path
    environment: dict[str, str]
    gunicorn_log: Path

    @property
    def origin(self) -> str:
        return f"https://{HOST}:{self.https_port}"

    def browser(self, address: str) -> "Browser":
        return Browser(self, address)

    def plain_http(self, path: str) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        connection.request("GET", path, headers={"Host": HOST})
        return connection.getresponse()


class _ToNginx(http.client.HTTPSConnection):
    """https://tollgate.test:PORT as a browser at `source_address` reaches it: to 127.0.0.1, the certificate checked
    for the host name."""

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout, self.source_address)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    cookies: SimpleCookie


@dataclass
class Browser:
    """One person's browser at one loopback address: keeps cookies, sends what a browser sends."""

    deployment: Deployment
    address: str
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self, method: str, path: str, *, body=None, headers: dict[str, str] | None = None, chunked: bool = False
    ) -> Answer:
        context = ssl.create_default_context(cafile=str(self.deployment.certificate))
        connection = _ToNginx(
            HOST, self.deployment.https_port, timeout=30, source_address=(self.address, 0), context=context
        )
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        connection.request(method, path, body=body, headers=sent, encode_chunked=chunked)
        response = connection.getresponse()
        answer = Answer(response.status, response.headers, response.read(), SimpleCookie())
        for set_cookie in response.headers.get_all("Set-Cookie") or []:
            answer.cookies.load(set_cookie)
        self.cookies |= {name: morsel.value for name, morsel in answer.cookies.items()}
        connection.close()
        return answer

    def sign_in(self, username: str, password: str, **headers: str) -> Answer:
        """GET the login form (for its CSRF token and cookie), then POST it with `headers` (Origin, Referer, ...)."""
        form = self.request("GET", "/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.body)[1].decode()
        body = f"csrfmiddlewaretoken={token}&username={username}&password={password.replace(' ', '+')}"
        headers = {"Content-Type": "application/x-www-form-urlencoded"} | headers
        return self.request("POST", "/login/", body=body, headers=headers)


def _nginx_site(*, https_port: int, http_port: int, gunicorn_port: int, static_root: Path, tls: Path) -> str:
    return replaced(
        (DEPLOY / "nginx" / "tollgate.conf").read_text(),
        {
            "/etc/letsencrypt/live/tollgate.example.com/fullchain.pem": str(tls / "certificate.pem"),
            "/etc/letsencrypt/live/tollgate.example.com/privkey.pem": str(tls / "key.pem"),
            "tollgate.example.com": HOST,
            "listen 80;": f"listen 127.0.0.1:{http_port};",
            "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
            "server 127.0.0.1:8000;": f"server 127.0.0.1:{gunicorn_port};",
            "/srv/tollgate/staticfiles/": f"{static_root}/",
        },
        name="deploy/nginx/tollgate.conf",
    )


def _nginx_main(directory: Path) -> str:
    """What Debian's /etc/nginx/nginx.conf gives the site, with every file nginx writes in `directory`."""
    user = f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};" if os.getuid() == 0 else ""
    temporary = "\n".join(f"    {kind}_temp_path {directory}/{kind};" for kind in ("client_body", "proxy", "fastcgi"))
    temporary += f"\n    uwsgi_temp_path {directory}/uwsgi;\n    scgi_temp_path {directory}/scgi;"
    return f"""{user}
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log {directory}/access.log;
{temporary}
    include {directory}/tollgate.conf;
}}
"""


def _self_signed_certificate(directory: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=DNS:{HOST}",
         "-keyout", str(directory / "key.pem"), "-out", str(directory / "certificate.pem")],
        check=True, capture_output=True,
    )  # fmt: skip


def deployment_environment(directory: Path, *, https_port: int, static_root: Path) -> dict[str, str]:
    """The documented settings, with this deployment's hosts, addresses and secret files (every other one as the file
    has it), and nothing else from the suite's environment (which runs with DEBUG=1)."""
    (directory / "secret_key").write_text(os.urandom(48).hex())
    (directory / "judge_api_key").write_text("sk-unused")
    (directory / "smtp_password").write_text("unused")
    origin = f"https://{HOST}:{https_port}"
    place = {
        "ALLOWED_HOSTS": HOST,
        "CSRF_TRUSTED_ORIGINS": origin,
        "TOLLGATE_BASE_URL": origin,
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY_FILE": str(directory / "secret_key"),
        "JUDGE_API_KEY_FILE": str(directory / "judge_api_key"),
        "EMAIL_HOST_PASSWORD_FILE": str(directory / "smtp_password"),
    }
    documented = documented_settings(DEPLOY / "tollgate.env.example")
    assert set(place) <= set(documented), "deploy/tollgate.env.example lost a setting this test places"
    carried = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return carried | documented | place | {"STATIC_ROOT": str(static_root)}


def manage(*arguments: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *arguments], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def finished(process: subprocess.Popen) -> subprocess.CompletedProcess:
    output, _ = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, output)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def deployment(django_db_setup, tmp_path_factory) -> Iterator[Deployment]:
    """nginx in front of gunicorn, started once for the module; collectstatic runs beside gunicorn's start. Tests
    that use it commit what gunicorn reads: mark them `django_db(transaction=True)` (pytest-django runs those
    together, so the module's tests stay together and share one start)."""
    nginx = _nginx()
    directory = tmp_path_factory.mktemp("deploy")
    static_root = directory / "static"
    https_port, http_port = free_port(), free_port()
    env = deployment_environment(directory, https_port=https_port, static_root=static_root)
    collectstatic = manage("collectstatic", "--noinput", env=env)
    _self_signed_certificate(directory)

    gunicorn_log = directory / "gunicorn.log"
    with gunicorn_log.open("w") as log:
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(DEPLOY / "gunicorn.conf.py"), "-b", "127.0.0.1:0", "-w", "1",
             "reviewer.wsgi"],
            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = None
    try:

        def gunicorn_port() -> int | None:
            assert gunicorn.poll() is None, gunicorn_log.read_text()
            found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", gunicorn_log.read_text())
            return found and int(found[1])

        port = wait_until(gunicorn_port, timeout=60, message="gunicorn to listen")
        (directory / "tollgate.conf").write_text(
            _nginx_site(
                https_port=https_port, http_port=http_port, gunicorn_port=port, static_root=static_root, tls=directory
            )
        )
        (directory / "nginx.conf").write_text(_nginx_main(directory))
        server = subprocess.Popen(
            [nginx, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log"),
             "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(lambda: _listening(server, https_port, directory), timeout=30, message="nginx to listen")
        collected = finished(collectstatic)
        assert collected.returncode == 0, collected.stdout
        yield Deployment(https_port, http_port, directory / "certificate.pem", static_root, env, gunicorn_log)
    finally:
        for process in (server, gunicorn, collectstatic):
            if process is not None:
                _stop(process)


def _listening(server: subprocess.Popen, port: int, directory: Path) -> bool:
    if server.poll() is not None:
        log = directory / "error.log"
        raise RuntimeError(f"nginx exited with {server.returncode}:\n{log.read_text() if log.exists() else ''}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
