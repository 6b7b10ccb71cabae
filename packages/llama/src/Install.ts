/**
 * How to install node-llama-cpp where a program loads it from: the exact command for how the
 * program was installed, and the smallest install that runs on this platform. node-llama-cpp
 * lists every platform's and GPU's prebuilt binaries as optional dependencies (hundreds of MB on
 * Linux x64, most of it CUDA); `--omit=optional` leaves them out and the one CPU build of this
 * platform is named instead.
 */
import * as path from "node:path"

/** The node-llama-cpp version rx is tested with; its platform packages carry the same version. */
export const version = "3.22.1"

/** How the program was installed. */
export type Where =
  /** In npm's default global prefix (`npm install -g`). */
  | { readonly _tag: "global"; readonly prefix: string }
  /** In another prefix (`npm install -g --prefix DIR`, as `scripts/install-rx.mjs --prefix DIR` does). */
  | { readonly _tag: "prefix"; readonly prefix: string }
  /** Run from a clone of rx's repository (`pnpm rx`, `packages/cli/dist/rx.mjs`). */
  | { readonly _tag: "workspace"; readonly root: string }
  /** Anything else: a project's dependency, a copy. */
  | { readonly _tag: "unknown" }

/** node-llama-cpp's prebuilt CPU build for a platform and CPU, if it publishes one (macOS on arm64: Metal, its only build). */
export const cpuPackage = (platform: string, arch: string): string | undefined => {
  const name = ({
    "linux-x64": "linux-x64",
    "linux-arm64": "linux-arm64",
    "linux-arm": "linux-armv7l",
    "linux-riscv64": "linux-riscv64",
    "darwin-arm64": "mac-arm64-metal",
    "darwin-x64": "mac-x64",
    "win32-x64": "win-x64",
    "win32-arm64": "win-arm64"
  } as Record<string, string | undefined>)[`${platform}-${arch}`]
  return name === undefined ? undefined : `@node-llama-cpp/${name}`
}

/**
 * Where the program whose entry file is `file` (its real path) was installed: under
 * `<prefix>/lib/node_modules/@rx/cli/` (`<prefix>/node_modules/@rx/cli/` on Windows) it is a
 * global install, in npm's default prefix (beside Node's own `bin`) or another; under
 * `<root>/packages/cli/` of a folder with `pnpm-workspace.yaml`, a clone.
 */
export const whereOf = (file: string, options: { readonly execPath: string; readonly platform: string; readonly exists: (file: string) => boolean }): Where => {
  const p = options.platform === "win32" ? path.win32 : path.posix
  const parts = p.resolve(file).split(p.sep)
  const at = parts.lastIndexOf("node_modules")
  if (at > 0 && parts[at + 1] === "@rx" && parts[at + 2] === "cli") {
    const windows = options.platform === "win32"
    const lib = parts.slice(0, at)
    if (!windows && lib[lib.length - 1] !== "lib") return { _tag: "unknown" }
    const prefix = (windows ? lib : lib.slice(0, -1)).join(p.sep) || p.sep
    // npm's default global prefix: Node's folder on Windows, the parent of Node's `bin` elsewhere.
    const defaultPrefix = windows ? p.dirname(options.execPath) : p.dirname(p.dirname(options.execPath))
    return { _tag: prefix === defaultPrefix ? "global" : "prefix", prefix }
  }
  const cli = parts.lastIndexOf("cli")
  if (cli > 1 && parts[cli - 1] === "packages") {
    const root = parts.slice(0, cli - 1).join(p.sep) || p.sep
    if (options.exists(p.join(root, "pnpm-workspace.yaml"))) return { _tag: "workspace", root }
  }
  return { _tag: "unknown" }
}

/** A path as one word of a shell command line. */
const word = (text: string) => (/^[\w./:@\\-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`)

/**
 * The command that installs node-llama-cpp where the program installed `where` loads it, for
 * this platform. npm ignores `--omit=optional` in a global install (`-g`), so the packages go into
 * the prefix's `node_modules` as a plain install there (`--no-save`: no package.json is written):
 * rx's modules in that prefix find them, and `npm install -g` keeps them.
 */
export const hint = (where: Where, platform: string, arch: string): string => {
  if (where._tag === "workspace") {
    return `pnpm install --frozen-lockfile in ${word(where.root)} (node-llama-cpp is one of the workspace's dependencies)`
  }
  const cpu = cpuPackage(platform, arch)
  // Global packages live in <prefix>/lib/node_modules (<prefix>/node_modules on Windows).
  const modules = (prefix: string) => (platform === "win32" ? prefix : path.posix.join(prefix, "lib"))
  const place = where._tag === "unknown" ? (platform === "win32" ? "\"$(npm prefix -g)\"" : "\"$(npm prefix -g)/lib\"") : word(modules(where.prefix))
  const command = cpu === undefined
    ? `npm install -g${where._tag === "prefix" ? ` --prefix ${word(where.prefix)}` : ""} node-llama-cpp@${version}`
    : `npm install --prefix ${place} --no-save --omit=optional node-llama-cpp@${version} ${cpu}@${version}`
  const what = cpu === undefined
    ? "node-llama-cpp publishes no prebuilt binary for this platform: it builds llama.cpp when installed, which needs cmake and a C++ compiler"
    : "the CPU build for this platform only, about 85 MB; npm install -g node-llama-cpp@3 would fetch every GPU build too, hundreds of MB"
  return where._tag === "unknown"
    ? `${command} (for a globally installed rx; elsewhere, install node-llama-cpp where rx's own modules are; ${what})`
    : `${command} (${what})`
}
