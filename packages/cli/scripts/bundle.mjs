// Bundle the built CLI into one file: Node then parses one module instead of hundreds, so
// `rx` starts several times faster. better-sqlite3 and node-llama-cpp stay external (native
// addons; node-llama-cpp is imported only for --model-file).
import { build } from "esbuild"
import { readFileSync, rmSync } from "node:fs"

const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))

// Split at every dynamic import: a command loads only the chunks it reaches (`rx --version` none,
// `rx list` no server, cluster, MCP or model adapter).
rmSync("dist/rx-chunks", { recursive: true, force: true })
await build({
  entryPoints: { rx: "dist/src/bin.js" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  splitting: true,
  chunkNames: "rx-chunks/[name]-[hash]",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["better-sqlite3", "node-llama-cpp"],
  banner: { js: "import { createRequire as __rxRequire } from 'node:module'; const require = __rxRequire(import.meta.url);" },
  // The version `rx --version` prints: the package's, fixed at bundle time.
  define: { __RX_VERSION__: JSON.stringify(version) },
  logLevel: "warning"
})
