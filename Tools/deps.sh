#!/usr/bin/env bash
# Installs the Debian packages ledger builds and tests with, when any is missing.
# Safe to run again: it does nothing when everything is there.
set -euo pipefail
packages=(pkg-config binutils libc6-dev liblmdb-dev lmdb-utils libssl-dev libjansson-dev libjemalloc-dev libmicrohttpd-dev libxml2-dev libzip-dev sqlite3 curl openssl time strace)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing Debian packages: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
