#!/bin/bash
# Build Slurm 24.11.5 from Debian trixie's upstream orig tarball into $SLURM_PREFIX on Debian 12 (bookworm); run as root.
# Only a temporary deb-src entry is added (no binary suites, no pinning); it is removed again, so installed
# packages are untouched. Measured on 2 cores (-j2): configure 22 s, make 3 min 52 s, make install 24 s; 395 MB.
# Copied from the reference pack (shared/reference/slurm/lab/) into spurinv unchanged except for this line; run it
# through ensure-slurm.sh, which skips it when $SLURM_PREFIX already holds 24.11.5.
set -euo pipefail
SRC_DIR="${SRC_DIR:-/tmp/slurm-src}"; PREFIX="${SLURM_PREFIX:-/opt/slurm-24.11}"; LAB_DIR="${LAB_DIR:-/tmp/slurm-lab}"
SRCLIST=/etc/apt/sources.list.d/zz-trixie-src-TEMP.sources
apt-get update
# build deps from bookworm (24.11 does not need llhttp); munge for the runtime; curl for the lab scripts
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends build-essential pkg-config python3 \
  libmunge-dev munge libjson-c-dev libjwt-dev libhttp-parser-dev libyaml-dev liblz4-dev curl
trap 'rm -f "$SRCLIST"' EXIT
cat > "$SRCLIST" <<'SRCS'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRCS
apt-get update
mkdir -p "$SRC_DIR" && cd "$SRC_DIR"
# Only the orig tarball is needed. A mirror that answers 404 for the .dsc/.debian.tar.xz makes apt-get exit
# non-zero after downloading it, hence "|| true"; the md5 check below is the real test.
apt-get source --download-only slurm-wlm=24.11.5-4+deb13u1 || true
echo "4059b2f58afe4b9494be08b1f1195e4c  slurm-wlm_24.11.5.orig.tar.gz" | md5sum -c -
rm -f "$SRCLIST"; apt-get update                   # back to bookworm-only lists
tar xzf slurm-wlm_24.11.5.orig.tar.gz             # -> slurm-slurm-24-11-5-1/
cd slurm-slurm-24-11-5-1
time ./configure --prefix="$PREFIX" --sysconfdir="$PREFIX/etc" \
  --with-munge --with-jwt --with-json --with-http-parser --with-yaml \
  --enable-multiple-slurmd --disable-sview --disable-x11 \
  --without-hdf5 --without-pmix --without-ucx --without-rsmi --without-nvml
# configure should report json-c, jwt (jwt_add_header), http-parser, libyaml and munge, and enable slurmrestd
grep -E 'json installation|jwt_add_header|http-parser installation|libyaml installation|compile slurmrestd' config.log || true
time make -j"${JOBS:-$(nproc)}"
time make -j"${JOBS:-$(nproc)}" install
# default config path -> the lab's rendered config, so a client run without SLURM_CONF does not fall back to
# "configless" DNS SRV lookups
mkdir -p "$PREFIX/etc"
ln -sf "$LAB_DIR/etc/slurm.conf" "$PREFIX/etc/slurm.conf"
ln -sf "$LAB_DIR/etc/gres.conf" "$PREFIX/etc/gres.conf"
"$PREFIX/sbin/slurmctld" -V
