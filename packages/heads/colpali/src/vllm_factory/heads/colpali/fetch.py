"""Image URLs fetched under a policy: public addresses only, one deadline per request, a cap on
concurrent fetches, redirects re-checked, bytes capped. No vLLM import.

vLLM 0.26 - 0.32 call an IOProcessor's request parsing synchronously on the API server's event
loop, so a request's fetches run here, all at once, on a loop of this module's own (one thread
per API process), and the request waits for them up to its deadline: a slow or silent host holds
the API server for at most that deadline, whatever the number of URLs.

The policy follows vLLM's own media settings and adds to them:

- ``--allowed-media-domains`` (vLLM): when set, a URL's host must be one of them, at every hop;
- ``VLLM_MEDIA_URL_ALLOW_REDIRECTS`` (vLLM): redirects are followed (at most ``MAX_REDIRECTS``)
  only if it allows them, each target checked again;
- addresses: every address a host resolves to must be public (``ipaddress``'s ``is_global``:
  not private, loopback, link-local (cloud metadata at 169.254.169.254 included), shared,
  reserved, multicast or unspecified); a literal address in the URL alike. The connection goes
  to an address that passed the check (no second lookup a DNS answer could change). A host the
  operator named in ``--allowed-media-domains`` is trusted whatever its addresses (an intranet
  image store), and ``VLLM_FACTORY_MEDIA_ALLOW_PRIVATE=1`` lifts the check for every host;
- ``VLLM_FACTORY_MEDIA_FETCH_DEADLINE``: seconds for all of one request's fetches together
  (also at most vLLM's ``VLLM_IMAGE_FETCH_TIMEOUT``);
- ``VLLM_FACTORY_MEDIA_MAX_CONCURRENT_FETCHES``: fetches in flight in this process.

A refused or failed URL gets a short, generic reason for the client (:class:`FetchError`); the
log has the detail.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
READ_CHUNK = 64 * 1024


class FetchError(ValueError):
    """An image URL that was not fetched; the message is what the client is told."""


@dataclass(frozen=True)
class MediaPolicy:
    allowed_domains: tuple[str, ...] = ()
    allow_private: bool = False
    allow_redirects: bool = True
    deadline: float = 5.0
    max_concurrent: int = 16

    def trusts(self, host: str) -> bool:
        """Whether ``host``'s addresses go unchecked: all of them with ``allow_private``, else
        the hosts the operator named."""
        return self.allow_private or host in self.allowed_domains


def address_allowed(address: str) -> bool:
    """Whether a fetched host's ``address`` is public (see the module docstring)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    return ip.is_global and not ip.is_multicast


def _literal_address(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def check_url(url: str, policy: MediaPolicy) -> None:
    """``FetchError`` when ``url`` may not be fetched whatever it resolves to."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise FetchError("is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise FetchError("is not an http(s) URL")
    if policy.allowed_domains and host not in policy.allowed_domains:
        logger.warning("image URL refused: host %s is not in --allowed-media-domains", host)
        raise FetchError("its host is not among the server's allowed media domains")
    literal = _literal_address(host)
    if literal is not None and not policy.trusts(host) and not address_allowed(literal):
        logger.warning("image URL refused: %s is not a public address", literal)
        raise FetchError("its address is not allowed on this server")


class _PublicResolver(AbstractResolver):
    """aiohttp's resolver keeping only the addresses the policy allows (the connection then
    goes to one of them)."""

    def __init__(self, policy: MediaPolicy) -> None:
        self.policy = policy
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list:
        found = await self._inner.resolve(host, port, family)
        if self.policy.trusts(host):
            return found
        kept = [entry for entry in found if address_allowed(entry["host"])]
        if not kept:
            addresses = sorted({entry["host"] for entry in found})
            logger.warning("image URL refused: %s resolves to %s, none public", host, addresses)
            raise OSError(f"{host} resolves to no public address")
        return kept

    async def close(self) -> None:
        await self._inner.close()


class Fetcher:
    """Fetches image URLs for one API server process (a loop on a thread of its own)."""

    def __init__(self, policy: MediaPolicy) -> None:
        self.policy = policy
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._ready = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._ready:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="vllm-factory-media", daemon=True
                )
                thread.start()
                asyncio.run_coroutine_threadsafe(self._open(), loop).result()
                self._loop = loop
        return self._loop

    async def _open(self) -> None:
        connector = aiohttp.TCPConnector(
            resolver=_PublicResolver(self.policy), limit=self.policy.max_concurrent
        )
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False)

    def fetch(self, urls: Sequence[str], max_bytes: int) -> list[bytes | FetchError]:
        """Each URL's bytes (at most ``max_bytes``), or why it was not fetched; all of them
        within the policy's deadline from now. URLs the policy refuses are not sent."""
        results: list[bytes | FetchError | None] = []
        for url in urls:
            try:
                check_url(url, self.policy)
                results.append(None)
            except FetchError as error:
                results.append(error)
        todo = [url for url, result in zip(urls, results) if result is None]
        if todo:
            loop = self._start()
            future = asyncio.run_coroutine_threadsafe(self._fetch_all(todo, max_bytes), loop)
            try:
                fetched = iter(future.result(timeout=self.policy.deadline + 1.0))
            except TimeoutError:  # the fetch loop itself is stuck: give up on this request
                future.cancel()
                fetched = iter([FetchError("timed out")] * len(todo))
            results = [next(fetched) if result is None else result for result in results]
        return results  # type: ignore[return-value]

    async def _fetch_all(self, urls: Sequence[str], max_bytes: int) -> list[bytes | FetchError]:
        tasks = [asyncio.ensure_future(self._fetch_one(url, max_bytes)) for url in urls]
        _, pending = await asyncio.wait(tasks, timeout=self.policy.deadline)
        for task in pending:
            task.cancel()
        results: list[bytes | FetchError] = []
        for url, task in zip(urls, tasks):
            if task in pending:
                logger.warning("image URL %s: not fetched within %.1f s", url, self.policy.deadline)
                results.append(FetchError(f"was not fetched within {self.policy.deadline:g} s"))
            elif task.exception() is not None:
                error = task.exception()
                if isinstance(error, FetchError):
                    results.append(error)
                else:
                    logger.warning("image URL %s: %s: %s", url, type(error).__name__, error)
                    results.append(FetchError("could not be fetched"))
            else:
                results.append(task.result())
        return results

    async def _fetch_one(self, url: str, max_bytes: int) -> bytes:
        for _ in range(MAX_REDIRECTS + 1):
            check_url(url, self.policy)
            async with self._session.get(url, allow_redirects=False) as response:
                if response.status in REDIRECTS:
                    target = response.headers.get("Location")
                    if not self.policy.allow_redirects or not target:
                        logger.warning("image URL %s: redirect not followed", url)
                        raise FetchError("redirects to another address (not followed here)")
                    url = urljoin(url, target)
                    continue
                if response.status != 200:
                    logger.warning("image URL %s: HTTP %d", url, response.status)
                    raise FetchError(f"answered HTTP {response.status}")
                if (response.content_length or 0) > max_bytes:
                    raise FetchError(f"is larger than {max_bytes} bytes")
                body = bytearray()
                async for chunk in response.content.iter_chunked(READ_CHUNK):
                    body += chunk
                    if len(body) > max_bytes:
                        raise FetchError(f"is larger than {max_bytes} bytes")
                return bytes(body)
        raise FetchError(f"redirects more than {MAX_REDIRECTS} times")
