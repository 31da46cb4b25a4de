#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR with the openssl command (P-256 keys, valid for
# a day), and lists what it made:
#   ca.pem, ca.key                   the CA that signs the server's and the client's certificates
#   server.pem, server.key           CN=localhost, subjectAltName DNS:localhost, IP:127.0.0.1
#   client.pem, client.key           a client certificate signed by ca (CN only, no SAN)
#   writer.pem, writer.key           a client certificate signed by ca, CN=emb test writer,
#                                    subjectAltName URI:spiffe://emb.test/writer,
#                                    DNS:writer.emb.test (the admin tests' allowed writer)
#   other_ca.pem, other_ca.key       a second, unrelated CA
#   other_client.pem, other_client.key  a client certificate signed by other_ca
#   encrypted.key                    server.key encrypted with a passphrase ("secret")
#   expired.pem, not_yet_valid.pem   server.key's certificate signed by ca, valid only in the past
#                                    (until yesterday) and only in the future (from tomorrow)
#   make_test_certs.sh DIR
set -euo pipefail
cd "$1"

# ca NAME SUBJECT: a self-signed CA certificate.
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
    -out "$1.pem" -days 1 -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# leaf NAME CA SUBJECT EXTENSIONS: a certificate signed by CA.
leaf() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
    -out "$1.csr" -subj "/CN=$3" 2>/dev/null
  printf '%s\n' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 1 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm "$1.csr" "$1.ext"
}

ca ca "emb test CA"
ca other_ca "emb other test CA"
leaf server ca localhost "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf client ca "emb test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
leaf writer ca "emb test writer" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=URI:spiffe://emb.test/writer,DNS:writer.emb.test"
leaf other_client other_ca "emb other test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
openssl pkey -in server.key -aes256 -passout pass:secret -out encrypted.key
# openssl 3.0's req and x509 take no dates in the past: Python's cryptography signs these two.
python3 - <<'PY'
import datetime
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

def load(path, kind):
    data = open(path, "rb").read()
    return serialization.load_pem_private_key(data, None) if kind == "key" else \
        x509.load_pem_x509_certificate(data)

ca_key, ca_cert, server_key = load("ca.key", "key"), load("ca.pem", "cert"), load("server.key", "key")
now = datetime.datetime.now(datetime.timezone.utc)
day = datetime.timedelta(days=1)
for name, start, end in (("expired.pem", now - 3 * day, now - day),
                         ("not_yet_valid.pem", now + day, now + 3 * day)):
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_cert.subject).public_key(server_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(ca_key, hashes.SHA256()))
    open(name, "wb").write(cert.public_bytes(serialization.Encoding.PEM))
PY
openssl verify -CAfile ca.pem server.pem client.pem writer.pem >/dev/null
openssl verify -CAfile other_ca.pem other_client.pem >/dev/null
ls
