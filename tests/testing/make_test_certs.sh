#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR with the openssl command (P-256 keys, valid for
# a day), and lists what it made:
#   ca.pem, ca.key                   the CA that signs the server's and the client's certificates
#   server.pem, server.key           CN=localhost, subjectAltName DNS:localhost, IP:127.0.0.1
#   client.pem, client.key           a client certificate signed by ca
#   other_ca.pem, other_ca.key       a second, unrelated CA
#   other_client.pem, other_client.key  a client certificate signed by other_ca
#   encrypted.key                    server.key encrypted with a passphrase ("secret")
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
leaf other_client other_ca "emb other test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
openssl pkey -in server.key -aes256 -passout pass:secret -out encrypted.key
openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
openssl verify -CAfile other_ca.pem other_client.pem >/dev/null
ls
