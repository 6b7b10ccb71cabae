// Bundle the built CLI: Node then parses a few files instead of hundreds, so `rx` starts several
// times faster. better-sqlite3 and node-llama-cpp stay external (native addons; node-llama-cpp is
// imported only for --model-file).
//
// - `dist/rx.mjs`: the entry (src/bin.ts). It answers `rx --version` itself and loads the rest.
// - `dist/rx-chunks/*.cjs`: the rest, split at every dynamic import so that a command loads only
//   the chunks it reaches (`rx list` no server, cluster, MCP or model adapter), one copy of each
//   module (of `effect` above all) whatever loads it. esbuild splits only ES modules: each chunk
//   is then turned into CommonJS, which `rx.mjs` compiles with V8's code cache
//   (src/internal/load.ts); a dynamic import of a chunk becomes a `require` in a promise, and of
//   an outside ES module (node-llama-cpp) `__rx.import`, which the loader does with `import()`.
import { build, transform } from "esbuild"
import { createHash } from "node:crypto"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { basename, dirname, join, relative } from "node:path"

const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
const define = { __RX_VERSION__: JSON.stringify(version) }
const external = ["better-sqlite3", "node-llama-cpp"]

// A barrel (`effect`'s index, `@effect/platform`'s...) imports every module of its package; esbuild
// puts each module a chunk uses into the chunks of every entry that *reaches* it through imports,
// so one `import { Path } from "@effect/platform"` put the HTTP API builder, which only `rx serve`
// uses, into what `rx list` loads. rx's own files import from the modules instead:
// `import { A, B } from "pkg"` (effect, @effect/*, @rx/*) becomes `import * as A from "<pkg's A.js>"`
// (and a plain re-export from its module). A barrel with anything else is left as it is:
// `@rx/kernel`'s, which re-exports `Repair` from @rx/formats (resolving that too took 80 KB off
// what `rx list` loads and nothing off its start-up: packages/bench/README.md).
const barrels = new Map()
const barrelOf = async (build, name, resolveDir) => {
  const resolved = await build.resolve(name, { kind: "import-statement", resolveDir })
  if (resolved.errors.length > 0 || resolved.external) return undefined
  if (barrels.has(resolved.path)) return barrels.get(resolved.path)
  const text = readFileSync(resolved.path, "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "")
  const statements = text.split(";").map((statement) => statement.trim()).filter((statement) => statement !== "")
  let entries = new Map()
  for (const statement of statements) {
    const namespace = /^export \* as (\w+) from "(\.\/[\w/.-]+)"$/.exec(statement)
    const named = /^export \{([\w\s,]+)\} from "(\.\/[\w/.-]+)"$/.exec(statement)
    if (namespace !== null) entries.set(namespace[1], { namespace: true, path: join(dirname(resolved.path), namespace[2]) })
    else if (named !== null) for (const one of named[1].split(",").map((n) => n.trim()).filter((n) => n !== "")) entries.set(one, { namespace: false, path: join(dirname(resolved.path), named[2]) })
    else {
      entries = undefined // Not only re-exports: left as it is.
      break
    }
  }
  barrels.set(resolved.path, entries)
  return entries
}
const unbarrel = {
  name: "unbarrel",
  setup(build) {
    build.onLoad({ filter: /[\\/]packages[\\/][\w-]+[\\/]dist[\\/]src[\\/].*\.js$/ }, async (args) => {
      let text = readFileSync(args.path, "utf8")
      const imports = [...text.matchAll(/^import \{([\w\s,]+)\} from "((?:@effect\/|@rx\/)?[\w-]+)";$/gm)]
      for (const [statement, names, from] of imports) {
        const entries = from === "effect" || from.startsWith("@effect/") || from.startsWith("@rx/") ? await barrelOf(build, from, dirname(args.path)) : undefined
        if (entries === undefined) continue
        const parts = names.split(",").map((n) => n.trim()).filter((n) => n !== "").map((n) => {
          const [imported, local = imported] = n.split(/\s+as\s+/)
          const entry = entries.get(imported)
          if (entry === undefined) return undefined
          return entry.namespace
            ? `import * as ${local} from ${JSON.stringify(entry.path)};`
            : `import { ${imported} as ${local} } from ${JSON.stringify(entry.path)};`
        })
        if (parts.some((part) => part === undefined)) continue
        text = text.replace(statement, parts.join(" "))
      }
      return { contents: text, loader: "js", resolveDir: dirname(args.path) }
    })
  }
}

// Node's modules that its own start does not load, which a chunk imports for a few functions
// (node:crypto for a temporary folder's name, child_process for commands...): each costs 1-4 ms
// to load, so a chunk loads one when it first uses it. Only the forms esbuild writes are changed:
// `var X = require("node:m")` and `var X = __toESM(require("node:m"))`, used as `X.name`.
const lazy = ["node:crypto", "node:child_process", "node:zlib", "node:readline"]
const lazyBuiltins = (code) => {
  let changed = false
  const out = code.replace(/^var (\w+) = (__toESM\()?require\("(node:[\w_]+)"\)(\))?;$/gm, (line, name, toEsm, module, close) => {
    if (!lazy.includes(module) || (toEsm === undefined) !== (close === undefined)) return line
    changed = true
    return `var ${name} = __rxLazy(() => require(${JSON.stringify(module)}), ${toEsm !== undefined});`
  })
  if (!changed) return code
  const helper = "var __rxLazy = (load, esm) => { let m; return new Proxy({}, { get: (_, key) => { m ??= load(); return esm && key === \"default\" ? m : m[key]; } }); };"
  return `${helper}\n${out}`
}

const split = await build({
  entryPoints: { main: "dist/src/main.js" },
  outdir: "dist/rx-chunks",
  outExtension: { ".js": ".cjs" },
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  splitting: true,
  bundle: true,
  platform: "node",
  target: "node22",
  format: "esm",
  external,
  define,
  plugins: [unbarrel],
  metafile: true,
  write: false,
  logLevel: "warning"
})

rmSync("dist/rx-chunks", { recursive: true, force: true })
mkdirSync("dist/rx-chunks", { recursive: true })
let main
const hashes = {}
for (const file of split.outputFiles) {
  const path = relative(process.cwd(), file.path)
  const meta = split.metafile.outputs[path]
  if (meta === undefined) throw new Error(`${path}: not in esbuild's metafile`)
  if (meta.entryPoint === "dist/src/main.js") main = basename(path)
  let text = file.text
  // Dynamic imports of outside packages (not Node's own): ES modules maybe, so `import()` they stay.
  const outside = [...new Set(meta.imports.filter((i) => i.kind === "dynamic-import" && i.external && !i.path.startsWith("node:")).map((i) => i.path))]
  for (const name of outside) {
    const call = `import(${JSON.stringify(name)})`
    if (!text.includes(call)) throw new Error(`${path}: esbuild says it imports ${name}, but ${call} is not in it`)
    text = text.replaceAll(call, `__rx.import(${JSON.stringify(name)})`)
  }
  const prelude = [
    outside.length > 0 ? "var __rx = { import: (s) => require.rx !== undefined ? require.rx.import(s) : import(s) };" : "",
    text.includes("import.meta") ? "var __rx_meta_url = require(\"node:url\").pathToFileURL(__filename).href;" : ""
  ].filter((line) => line !== "").join("\n")
  const cjs = await transform(text, {
    format: "cjs",
    loader: "js",
    platform: "node",
    target: "node22",
    supported: { "dynamic-import": false },
    define: { "import.meta.url": "__rx_meta_url" },
    banner: prelude,
    logLevel: "warning"
  })
  const code = lazyBuiltins(cjs.code)
  writeFileSync(path, code)
  hashes[basename(path)] = createHash("sha256").update(code).digest("base64url").slice(0, 22)
}
if (main === undefined) throw new Error("no main chunk in esbuild's output")
// What went where, to see what a command loads: RX_BUNDLE_META=<file> writes esbuild's metafile.
if (process.env["RX_BUNDLE_META"] !== undefined) writeFileSync(process.env["RX_BUNDLE_META"], JSON.stringify(split.metafile))

await build({
  entryPoints: { rx: "dist/src/bin.js" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  target: "node22",
  format: "esm",
  define: { ...define, __RX_MAIN__: JSON.stringify(`./rx-chunks/${main}`), __RX_CHUNKS__: JSON.stringify(hashes) },
  logLevel: "warning"
})
