"""Client certificates rdzvd must refuse under mTLS: expired, not yet valid,
issued by another CA, and made for servers only (extendedKeyUsage
serverAuth). Each handshake fails, and rdzvd goes on serving a good client.
The certificates are made with python3-cryptography from the test CA of
rdzvtest.make_certs."""

import datetime

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import rdzvtest as rt
from test_rdzvd_basic import server_info

DAY = datetime.timedelta(days=1)


def issue(ca_pem, ca_key_pem, not_before, not_after, eku):
    """A client key and certificate (PEM) for CN=node-9 signed by the CA."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "node-9")]))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            cert.public_bytes(serialization.Encoding.PEM))


def creds(c, key, cert):
    return grpc.ssl_channel_credentials(root_certificates=rt.read(c["ca"]),
                                        private_key=key, certificate_chain=cert)


@pytest.mark.parametrize("case", ["expired", "not_yet_valid", "other_ca",
                                  "server_auth_only"])
def test_bad_client_certificate_is_refused(tmp_path, case):
    c = rt.make_certs(tmp_path)
    now = datetime.datetime.utcnow()
    ca, ca_key = rt.read(c["ca"]), rt.read(c["ca_key"])
    nb, na, eku = now - DAY, now + DAY, ExtendedKeyUsageOID.CLIENT_AUTH
    if case == "expired":
        nb, na = now - 3 * DAY, now - DAY
    elif case == "not_yet_valid":
        nb, na = now + DAY, now + 3 * DAY
    elif case == "other_ca":
        ca, ca_key = rt.read(c["other_ca"]), rt.read(c["other_ca_key"])
    else:
        eku = ExtendedKeyUsageOID.SERVER_AUTH
    key, cert = issue(ca, ca_key, nb, na, eku)

    args = ["--tls-cert", c["server_cert"], "--tls-key", c["server_key"],
            "--tls-ca", c["ca"]]
    with rt.Daemon(tmp_path, args) as d:
        with grpc.secure_channel(d.addr, creds(c, key, cert)) as ch:
            with pytest.raises(grpc.RpcError) as e:
                server_info(ch, timeout=3)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        # The same CA's good certificate still gets in.
        good_key, good_cert = issue(rt.read(c["ca"]), rt.read(c["ca_key"]),
                                    now - DAY, now + DAY,
                                    ExtendedKeyUsageOID.CLIENT_AUTH)
        with grpc.secure_channel(d.addr, creds(c, good_key, good_cert)) as ch:
            assert server_info(ch).identity == "CN=node-9"
        assert d.stop() == 0
