"""Image URLs fetched under the media policy, against HTTP servers of this test on 127.0.0.1
(no vLLM). Loopback is what the policy refuses by default, so the fetching tests allow private
addresses explicitly and check the other rules (deadline, redirects, sizes) on top."""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Iterator

import pytest
from vllm_factory.heads.colpali.fetch import (
    Fetcher,
    FetchError,
    MediaPolicy,
    address_allowed,
    check_url,
)
from vllm_factory.testing.hosts import settled, silent_host

BODY = b"\x89PNG not really an image, bytes are all this module fetches"
LOOPBACK = MediaPolicy(allow_private=True, deadline=5.0)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", self.path.split("?to=", 1)[1])
            self.end_headers()
        elif self.path == "/big":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 200_000)
        elif self.path == "/missing":
            self.send_error(404)
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


@pytest.fixture
def silent() -> Iterator[tuple[str, list]]:
    """A port that accepts connections and never answers; the accepted sockets, as they come."""
    with silent_host() as host:
        yield host


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True), ("2001:4860:4860::8888", True),
        ("127.0.0.1", False), ("::1", False), ("10.1.2.3", False), ("192.168.0.1", False),
        ("169.254.169.254", False),  # cloud metadata (link-local)
        ("fd00:ec2::254", False),  # cloud metadata over IPv6 (unique local)
        ("100.64.0.1", False),  # shared address space
        ("192.0.2.1", False),  # documentation
        ("0.0.0.0", False), ("224.0.0.1", False), ("::ffff:127.0.0.1", False),
        ("not an address", False),
    ],
)  # fmt: skip
def test_only_public_addresses_are_allowed(address, public):
    assert address_allowed(address) is public


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/a.png", "address is not allowed"),
        ("http://[::1]:8000/a.png", "address is not allowed"),
        ("http://169.254.169.254/latest/meta-data/", "address is not allowed"),
        ("ftp://example.com/a.png", "not an http"),
        ("http:///a.png", "not an http"),
        ("http://example.com:99999/a.png", "not a valid URL"),
    ],
)
def test_urls_refused_before_anything_is_sent(url, reason):
    with pytest.raises(FetchError, match=reason):
        check_url(url, MediaPolicy())


def test_allowed_domains_are_vllms_exact_host_list():
    policy = MediaPolicy(allowed_domains=("images.example.com",))
    check_url("https://images.example.com/a.png", policy)
    with pytest.raises(FetchError, match="allowed media domains"):
        check_url("https://evil.example.com/a.png", policy)


def test_a_name_resolving_to_loopback_is_refused_and_the_log_says_why(server, caplog):
    url = server.replace("127.0.0.1", "localhost") + "/a.png"
    with caplog.at_level(logging.WARNING):
        (result,) = Fetcher(MediaPolicy()).fetch([url], 1_000_000)
    assert isinstance(result, FetchError) and str(result) == "could not be fetched"
    assert "resolves to" in caplog.text and "none public" in caplog.text


def test_allowed_private_addresses_are_fetched_with_a_byte_cap(server):
    fetcher = Fetcher(LOOPBACK)
    ok, big, missing = fetcher.fetch(
        [f"{server}/a.png", f"{server}/big", f"{server}/missing"], 100_000
    )
    assert ok == BODY
    assert isinstance(big, FetchError) and "larger than 100000 bytes" in str(big)
    assert isinstance(missing, FetchError) and "HTTP 404" in str(missing)


def test_redirects_are_checked_again_at_every_hop(server):
    """With private addresses allowed and the domain list naming 127.0.0.1 only, a redirect
    to another name for the same machine is refused; to the same host it is followed."""
    policy = MediaPolicy(allow_private=True, allowed_domains=("127.0.0.1",))
    port = server.rsplit(":", 1)[1]
    same, other = Fetcher(policy).fetch(
        [f"{server}/redirect?to=/a.png", f"{server}/redirect?to=http://localhost:{port}/a.png"],
        1_000_000,
    )
    assert same == BODY
    assert isinstance(other, FetchError) and "allowed media domains" in str(other)
    (refused,) = Fetcher(MediaPolicy(allow_private=True, allow_redirects=False)).fetch(
        [f"{server}/redirect?to=/a.png"], 1_000_000
    )
    assert isinstance(refused, FetchError) and "not followed" in str(refused)


def test_one_deadline_for_all_urls_of_a_request(silent):
    """Four URLs on a host that never answers: all are fetched at once (four connections
    open together), and all fail at the request's one deadline, with the same reason."""
    url, accepted = silent
    policy = MediaPolicy(allow_private=True, deadline=1.0)
    results = Fetcher(policy).fetch([f"{url}/{i}.png" for i in range(4)], 1_000_000)
    assert all(isinstance(r, FetchError) for r in results)
    assert {str(r) for r in results} == {"was not fetched within 1 s"}
    assert settled(accepted, 4) == 4


def test_concurrent_fetches_are_capped(silent):
    """With at most two fetches in flight, the silent host sees two connections, not four."""
    url, accepted = silent
    policy = MediaPolicy(allow_private=True, deadline=1.0, max_concurrent=2)
    Fetcher(policy).fetch([f"{url}/{i}.png" for i in range(4)], 1_000_000)
    assert settled(accepted, 2) == 2  # the fetch is over: no connection comes later


def test_a_host_the_operator_names_is_trusted_whatever_its_address(server):
    """``--allowed-media-domains 127.0.0.1`` (an intranet image store): that host is fetched;
    another name for the same machine is not (not named, and private)."""
    policy = MediaPolicy(allowed_domains=("127.0.0.1",))
    check_url("http://127.0.0.1/a.png", policy)
    (named,) = Fetcher(policy).fetch([f"{server}/a.png"], 1_000_000)
    assert named == BODY
    (other,) = Fetcher(MediaPolicy()).fetch([f"{server}/a.png"], 1_000_000)
    assert isinstance(other, FetchError) and "address is not allowed" in str(other)
