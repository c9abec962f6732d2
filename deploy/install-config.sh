#!/bin/sh
# Run by `meson install`: installs the example config as rdzvd's config
# file unless one is there. An installed config is the site's own, and
# meson has no way to install a file only where it is missing. DESTDIR is
# honoured; so is `meson install --dry-run`.
# Usage: install-config.sh EXAMPLE DEST
set -eu
src=$1
dst=${DESTDIR:-}$2

if [ -e "$dst" ]; then
	echo "Keeping $dst (it exists; the example is $src)"
	exit 0
fi
echo "Installing $src to $dst"
[ -z "${MESON_INSTALL_DRY_RUN:-}" ] || exit 0
mkdir -p "$(dirname "$dst")"
cp "$src" "$dst.new"
chmod 0644 "$dst.new"
mv "$dst.new" "$dst"
