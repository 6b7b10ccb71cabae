// Install the `rx` command from a clone, in one command:
//
//   node scripts/install-rx.mjs                 # into npm's global prefix (npm prefix -g)
//   node scripts/install-rx.mjs --prefix DIR    # into DIR: DIR/bin/rx
//   node scripts/install-rx.mjs --pack DIR      # only write the tarball into DIR
//
// It installs the workspace's dependencies if they are not (pnpm install --frozen-lockfile),
// builds (pnpm build), then packs ONE self-contained tarball: the bundled binary (dist/rx.mjs)
// and its native part, better-sqlite3, already built for this machine, with the two small
// modules it loads its addon with. `npm install -g` of that tarball needs no registry: nothing
// in it is fetched or compiled. The tarball is for the Node that runs this script (Node 22 or
// later): its platform, CPU and major version (its name says which), and better-sqlite3's addon
// is built for that Node (rebuilt first when the workspace's was built by another). For another
// Node or machine, run this script with that Node.
//
// Not included: node-llama-cpp, which only `--model-file` needs; `rx run --model-file` without it
// prints the command that installs it beside rx, the CPU build only (see the README).
import { execFileSync } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const major = Number(process.versions.node.split(".")[0])
if (major < 22) {
  console.error(`install-rx: rx needs Node 22 or later, and this is Node ${process.version}: run this script with Node 22 or 24`)
  process.exit(1)
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const cli = join(root, "packages", "cli")

const args = process.argv.slice(2)
const option = (name) => {
  const at = args.indexOf(name)
  if (at < 0) return undefined
  const value = args[at + 1]
  if (value === undefined || value.startsWith("--")) fail(`${name} needs a folder`)
  return resolve(value)
}
const fail = (message) => {
  console.error(`install-rx: ${message}`)
  process.exit(1)
}
const known = new Set(["--prefix", "--pack"])
for (const arg of args) if (arg.startsWith("--") && !known.has(arg)) fail(`unknown option ${arg} (--prefix DIR, or --pack DIR)`)
const prefix = option("--prefix")
const packOnly = option("--pack")

// What this script runs (pnpm, npm, node-gyp through them) runs on this Node: its folder first on PATH.
const env = { ...process.env, PATH: [dirname(process.execPath), process.env.PATH ?? ""].join(":") }
const run = (file, argv, cwd = root) => execFileSync(file, argv, { cwd, env, stdio: ["ignore", "inherit", "inherit"] })
const say = (text) => console.log(`install-rx: ${text}`)

/** pnpm: the one running this script, else PATH's (corepack provides it: corepack enable). */
const pnpm = (argv) => {
  const self = process.env.npm_execpath
  return self !== undefined && /pnpm/.test(self) ? run(process.execPath, [self, ...argv]) : run("pnpm", argv)
}

// 1. Dependencies and build.
if (!existsSync(join(cli, "node_modules", "better-sqlite3"))) {
  say("installing the workspace's dependencies (pnpm install --frozen-lockfile)")
  pnpm(["install", "--frozen-lockfile"])
}
say("building (pnpm build)")
pnpm(["build"])

// 2. The package: the binary, and better-sqlite3 with what it loads at run time.
const pkg = JSON.parse(readFileSync(join(cli, "package.json"), "utf8"))
const stage = mkdtempSync(join(tmpdir(), "rx-install-"))
const modules = join(stage, "node_modules")
/** A package's folder as pnpm laid it out (its dependencies are its siblings). */
const located = (name, from) => realpathSync(join(from, "node_modules", name))
const sqlite = located("better-sqlite3", cli)
const bindings = located("bindings", dirname(sqlite).replace(/\/node_modules$/, ""))
const fileUri = located("file-uri-to-path", dirname(bindings).replace(/\/node_modules$/, ""))
const addon = join(sqlite, "build", "Release", "better_sqlite3.node")
/**
 * Why this Node cannot load the addon (missing, or built for another Node), or undefined. Tried in
 * a child process: a process keeps an addon it once tried to load, whatever is rebuilt after.
 */
const unloadable = () => {
  if (!existsSync(addon)) return "it is missing"
  try {
    execFileSync(process.execPath, ["-e", `require(${JSON.stringify(addon)})`], { env, stdio: ["ignore", "ignore", "pipe"] })
    return undefined
  } catch (error) {
    const message = String(error?.stderr ?? error)
    const built = /NODE_MODULE_VERSION (\d+)/.exec(message)
    return built !== null ? `it was built for another Node, ABI ${built[1]}` : message.trim().split("\n")[0]
  }
}
const node = `Node ${process.version} (${process.platform}-${process.arch}, ABI ${process.versions.modules})`
const before = unloadable()
if (before !== undefined) {
  // Its own build script (node-gyp, which npm provides), run in its folder: `pnpm rebuild` takes
  // the build pnpm cached for another Node.
  say(`better-sqlite3's addon does not load on ${node} (${before}): rebuilding it for this Node (npm run build-release in ${sqlite})`)
  run("npm", ["run", "build-release"], sqlite)
  const after = unloadable()
  if (after !== undefined) fail(`better-sqlite3's addon still does not load on ${node}: ${after}`)
}
say(`packing for ${node}: better-sqlite3's native addon is built for it`)

const versionOf = (dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version
/** A dependency's package.json without scripts or gyp file: npm must neither run nor compile anything. */
const copyPackage = (from, name, parts) => {
  const to = join(modules, name)
  mkdirSync(to, { recursive: true })
  for (const part of parts) if (existsSync(join(from, part))) cpSync(join(from, part), join(to, part), { recursive: true })
  const manifest = JSON.parse(readFileSync(join(from, "package.json"), "utf8"))
  delete manifest.scripts
  delete manifest.gypfile
  delete manifest.devDependencies
  // npm packs a bundled dependency by its own `files`: here, all that was copied (the addon too).
  manifest.files = parts
  writeFileSync(join(to, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`)
}
copyPackage(sqlite, "better-sqlite3", ["lib", "build/Release/better_sqlite3.node", "LICENSE", "README.md"])
copyPackage(bindings, "bindings", ["bindings.js", "LICENSE.md", "README.md"])
copyPackage(fileUri, "file-uri-to-path", ["dist", "index.js", "LICENSE", "README.md"])
// better-sqlite3 names prebuild-install as a dependency; it is only its installer.
const sqliteManifest = JSON.parse(readFileSync(join(modules, "better-sqlite3", "package.json"), "utf8"))
delete sqliteManifest.dependencies?.["prebuild-install"]
writeFileSync(join(modules, "better-sqlite3", "package.json"), `${JSON.stringify(sqliteManifest, null, 2)}\n`)

cpSync(join(cli, "dist", "rx.mjs"), join(stage, "rx.mjs"))
cpSync(join(cli, "dist", "rx-chunks"), join(stage, "rx-chunks"), { recursive: true })
if (existsSync(join(root, "LICENSE"))) cpSync(join(root, "LICENSE"), join(stage, "LICENSE"))
const bundled = { "better-sqlite3": versionOf(sqlite), bindings: versionOf(bindings), "file-uri-to-path": versionOf(fileUri) }
const abi = process.versions.modules
writeFileSync(join(stage, "package.json"), `${JSON.stringify({
  name: "@rx/cli",
  version: pkg.version,
  description: `${pkg.description} Self-contained build for ${process.platform}-${process.arch}, Node ABI ${abi} (Node ${process.versions.node.split(".")[0]}).`,
  license: pkg.license,
  type: "module",
  bin: { rx: "rx.mjs" },
  engines: { node: `>=${process.versions.node.split(".")[0]} <${Number(process.versions.node.split(".")[0]) + 1}` },
  os: [process.platform],
  cpu: [process.arch],
  dependencies: bundled,
  bundleDependencies: Object.keys(bundled)
}, null, 2)}\n`)

// 3. One tarball.
const destination = packOnly ?? mkdtempSync(join(tmpdir(), "rx-tarball-"))
mkdirSync(destination, { recursive: true })
const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", destination], { cwd: stage, env, encoding: "utf8" }))[0]
const named = join(destination, `rx-${pkg.version}-${process.platform}-${process.arch}-node${abi}.tgz`)
cpSync(join(destination, packed.filename), named)
rmSync(join(destination, packed.filename))
rmSync(stage, { recursive: true, force: true })
if (packOnly !== undefined) {
  say(`wrote ${named}`)
  say(`install it with: npm install -g ${named}   (or --prefix DIR)`)
  process.exit(0)
}

// 4. Install it, and check the installed command runs.
say(`installing ${named} into ${prefix ?? "npm's global prefix"}`)
run("npm", ["install", "--global", "--offline", "--no-audit", "--no-fund", ...(prefix === undefined ? [] : ["--prefix", prefix]), named])
const binDir = prefix === undefined ? join(execFileSync("npm", ["prefix", "--global"], { env, encoding: "utf8" }).trim(), "bin") : join(prefix, "bin")
const version = execFileSync(join(binDir, "rx"), ["--version"], { env, encoding: "utf8" }).trim()
rmSync(destination, { recursive: true, force: true })
say(`installed ${version} for ${node}: ${join(binDir, "rx")}`)
if (!(process.env.PATH ?? "").split(":").includes(binDir)) say(`add it to your PATH: export PATH="${binDir}:$PATH"`)
say("try it: rx demo")
