#!/bin/sh
# tls-certs.sh DIR - a throwaway CA and certificates for the TLS tests,
# made with openssl: ca.crt; server.crt/.key for 127.0.0.1 and localhost;
# other.crt/.key for another name only; expired.crt/.key (for 127.0.0.1,
# valid in 2020 only); client.crt/.key (a client certificate); and
# rogue-ca.crt, a CA that signed none of them.
set -eu
d=$1
mkdir -p "$d"
cd "$d"
q() { "$@" > /dev/null 2>&1; }

q openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=redislock test CA" \
    -keyout ca.key -out ca.crt
q openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=rogue CA" \
    -keyout rogue-ca.key -out rogue-ca.crt

# leaf NAME SAN: a key and a certificate signed by the CA.
leaf() {
    q openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" \
        -out "$1.csr"
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$2" > "$1.ext"
    q openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -days 2 -extfile "$1.ext" -out "$1.crt"
}
leaf server "IP:127.0.0.1,DNS:localhost"
leaf other "DNS:other.example"
leaf client "DNS:redislock-client"

# An expired certificate: a tiny CA database, dates in 2020.
q openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout expired.key \
    -out expired.csr
mkdir -p db
: > db/index
echo 01 > db/serial
cat > ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = $d
database = \$dir/db/index
serial = \$dir/db/serial
new_certs_dir = \$dir/db
certificate = \$dir/ca.crt
private_key = \$dir/ca.key
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ext
[any]
commonName = supplied
[ext]
subjectAltName = IP:127.0.0.1,DNS:localhost
CNF
q openssl ca -batch -config ca.cnf -in expired.csr -out expired.crt \
    -startdate 20200101000000Z -enddate 20200102000000Z
test -s expired.crt
