"""A TLS server for one host name on 127.0.0.1, for the tests of who trusts what: a test CA made now, a
certificate for the name signed by it, and the server's context. Needs `cryptography` (a test dependency through
the mcp SDK); a test skips without it."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest


def tls_server(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, str]:
    """A server context with a certificate for `name` signed by a test CA, and that CA (PEM) for a client to trust."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(
        subject: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey, ca: bool
    ) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = cert("test CA", ca_key, ca_key, True)
    leaf = cert(name, leaf_key, ca_key, False)
    pem = serialization.Encoding.PEM
    (tmp_path / "leaf.pem").write_bytes(
        leaf.public_bytes(pem)
        + leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "leaf.pem")
    return server, ca.public_bytes(pem).decode()
