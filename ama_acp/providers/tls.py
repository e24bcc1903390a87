"""The TLS context of each HTTP client ama builds: the providers' streams, `ama setup`'s key check and
`ama doctor`'s provider check. httpx builds a verified context for every client by default, and that loads the CA
bundle (tens of ms of CPU each time); here the verified one is made once per process, and a plain-http URL's httpx client
gets one that never loads it (a model request sent straight over httpcore gets none at all: providers/exchange.py).
No httpx or ssl import at module level: importing this stays cheap.

A server whose certificate fails verification is named as such by all three (`certificate_failure`), with what a
person can do about it, not as a network failure: a private CA is trusted through SSL_CERT_FILE, which the verified
context reads (as httpx's own does)."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from ama_acp.errors import causes

if TYPE_CHECKING:
    import ssl


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The verified TLS context the client of every request to an https URL is built with: made once per process
    (it loads the CA bundle, tens of ms); the session manager makes it ahead of the first prompt.

    The one httpx makes by default, made as httpx makes it (a person's SSL_CERT_FILE, else SSL_CERT_DIR, else
    certifi's bundle) without importing httpx: a model request does not (exchange.py)."""
    import ssl

    import certifi

    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def plain_http(url: str) -> bool:
    """Whether `url` is plain http (a local model server: ollama, llama.cpp, a test's), whose requests need no
    TLS: their client is built with `untrusting_context` instead of loading the CA bundle."""
    return url[:7].lower() == "http://"


def untrusting_context() -> ssl.SSLContext:
    """The TLS context of a client that talks plain http only: one that verifies and trusts nothing (no CA
    loaded; certificates required, host names checked), made in well under a millisecond.

    Such a client never does TLS: its callers follow no redirect (`follow_redirects` is off, a 3xx is an answer or
    an error status), and were a request ever sent to an https URL with it (a redirect followed, a URL rewritten),
    the handshake would fail closed on the certificate, never go on unverified. A proxy's own TLS is not this
    context's (httpx gives a proxy its own, verified one)."""
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verify_mode CERT_REQUIRED, check_hostname on, no CA


def tls_for(url: str) -> ssl.SSLContext:
    """The context for a client (that follows no redirect) whose requests go to `url`."""
    return untrusting_context() if plain_http(url) else ssl_context()


# What a person can do about a certificate that failed verification: the verified context is httpx's, which reads
# the CA bundle SSL_CERT_FILE names instead of its own.
CERTIFICATE_ADVICE = (
    "If the server's certificate comes from your own CA, set SSL_CERT_FILE to that CA's PEM file in the "
    "environment ama starts with"
)


def certificate_failure(exc: BaseException) -> str | None:
    """Why the server's certificate failed verification (a CA not trusted, a host name it is not for, expired),
    when that is what ended the request `exc` reports (httpx and httpcore wrap the ssl error); None for any other
    failure."""
    import ssl

    for cause in causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause.verify_message or cause.reason or str(cause)
    return None
