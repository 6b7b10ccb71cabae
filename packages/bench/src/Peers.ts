/**
 * The peers of DESIGN.md section 8 on the same scripted loop (N-1 calls to `echo`, then a final
 * answer, an instant fake model), run beside rx in the same benchmark run: the harnesses of
 * `../shared/bench-peers` (LangGraph.js with and without SqliteSaver, the AI SDK, OpenAI Agents
 * JS, reactive-agents on Bun), each in its own child process with its own pinned packages.
 *
 * The harnesses are copied to a folder outside the git tree (`RX_BENCH_PEERS_DIR`, by default
 * `~/.cache/rx-bench/peers`) and their packages installed there with `npm ci` when missing or
 * when a harness's lock file changed; nothing lands in the repository.
 */
import { Effect, Schema } from "effect"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { join, resolve } from "node:path"

/** Where the harnesses come from: `../shared/bench-peers` beside the repository, or `RX_BENCH_PEERS_SOURCE`. */
export const source = process.env["RX_BENCH_PEERS_SOURCE"] ??
  resolve(import.meta.dirname, "..", "..", "..", "..", "..", "shared", "bench-peers")

/** Where they are installed and run. */
export const home = process.env["RX_BENCH_PEERS_DIR"] ?? join(homedir(), ".cache", "rx-bench", "peers")

/** The harness folders that have packages of their own. */
const packages = ["langgraph", "aisdk", "openai-agents", "reactive-agents"] as const

/** The harnesses could not be installed or a harness failed. */
export class PeerError extends Schema.TaggedError<PeerError>()("@rx/bench/PeerError", { message: Schema.String }) {}

const causeOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

const hash = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex")

/** Make the copied files writable (the shared copy is read-only), so a later copy can replace them. */
const writable = (dir: string): void => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue
    const path = join(dir, entry.name)
    chmodSync(path, entry.isDirectory() ? 0o755 : 0o644)
    if (entry.isDirectory()) writable(path)
  }
}

/**
 * Copy the harnesses to `home` (everything but results and data) and `npm ci` each folder whose
 * installed lock is not the current one. `log` gets progress lines; npm's own output goes to stderr.
 */
export const install = (log: (line: string) => void): Effect.Effect<void, PeerError> =>
  existsSync(join(source, "common.mjs"))
    ? Effect.try({
      try: () => installSync(log),
      catch: (error) => new PeerError({ message: `installing the peers in ${home} failed (npm ci needs the npm registry): ${causeOf(error)}` })
    })
    : Effect.fail(
      new PeerError({ message: `the peers' harnesses are not at ${source}: set RX_BENCH_PEERS_SOURCE to a copy of bench-peers` })
    )

const installSync = (log: (line: string) => void): void => {
  mkdirSync(home, { recursive: true })
  if (existsSync(join(home, "common.mjs"))) writable(home)
  cpSync(source, home, {
    recursive: true,
    filter: (from) => !/[/\\](results|data|node_modules)([/\\]|$)/.test(from.slice(source.length))
  })
  writable(home)
  for (const name of packages) {
    const dir = join(home, name)
    const lock = join(dir, "package-lock.json")
    const stamp = join(dir, "node_modules", ".rx-bench-lock")
    const want = hash(lock)
    if (existsSync(stamp) && readFileSync(stamp, "utf8") === want) continue
    log(`  installing ${name} (npm ci in ${dir})`)
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: ["ignore", 2, 2] })
    writeFileSync(stamp, want)
  }
}

/** One harness's JSON line (common.mjs `bench`), the fields used here. */
export interface HarnessResult {
  readonly us_per_iter_median: number
  readonly us_per_iter_min: number
  readonly us_per_iter_max: number
  readonly runs_done: number
  readonly peak_rss_mb: number
  readonly bytes_per_iter?: number
  readonly synchronous?: number
}

export interface Peer {
  /** The `--json` key. */
  readonly key: string
  readonly label: string
  /** The command, relative to `home`. */
  readonly command: (home: string) => readonly [string, ...Array<string>]
  /** `--runs` and `--warmup` at N. */
  readonly runs: (n: number) => { readonly runs: number; readonly warmup: number }
  /** What it is compared with in rx. */
  readonly against: "memory" | "sqlite"
  readonly note?: string
}

const node = (script: string, ...args: Array<string>) => (dir: string) =>
  [process.execPath, "--expose-gc", join(dir, script), ...args] as const
const few = (n: number) => (n >= 1_000 ? { runs: 5, warmup: 1 } : { runs: 9, warmup: 2 })

export const peers: ReadonlyArray<Peer> = [
  {
    key: "langgraph_sqlite",
    label: "LangGraph.js + SqliteSaver",
    command: node("langgraph/bench.mjs", "--variant", "sqlite"),
    // About 30 s per run at N = 1,000 (every checkpoint holds the whole history).
    runs: (n) => (n >= 1_000 ? { runs: 3, warmup: 0 } : { runs: 9, warmup: 2 }),
    against: "sqlite",
    note: "SQLite WAL, synchronous NORMAL"
  },
  {
    key: "langgraph_memory",
    label: "LangGraph.js + MemorySaver",
    command: node("langgraph/bench.mjs", "--variant", "memory"),
    runs: (n) => (n >= 1_000 ? { runs: 1, warmup: 0 } : { runs: 9, warmup: 2 }),
    against: "memory"
  },
  {
    key: "langgraph_none",
    label: "LangGraph.js, no checkpointer",
    command: node("langgraph/bench.mjs", "--variant", "none"),
    runs: few,
    against: "memory"
  },
  { key: "ai_sdk", label: "AI SDK generateText", command: node("aisdk/bench.mjs"), runs: few, against: "memory" },
  { key: "openai_agents", label: "OpenAI Agents JS Runner.run", command: node("openai-agents/bench.mjs"), runs: few, against: "memory" },
  {
    key: "reactive_agents_bun",
    label: "reactive-agents (on Bun)",
    command: (dir) => [join(dir, "reactive-agents", "node_modules", ".bin", "bun"), join(dir, "reactive-agents", "bench.mjs")] as const,
    runs: few,
    against: "memory",
    note: "Bun, not Node: it imports bun:sqlite"
  }
]

/** Run one harness at N in its own process; its data folder is removed afterwards (LangGraph's N = 1,000 file is 700 MB). */
export const run = (peer: Peer, n: number): Effect.Effect<HarnessResult, PeerError> =>
  Effect.try({
    try: () => runSync(peer, n),
    catch: (error) => new PeerError({ message: `${peer.label}, N=${n}: ${causeOf(error)}` })
  }).pipe(
    Effect.flatMap((line) =>
      line === undefined
        ? Effect.fail(new PeerError({ message: `${peer.label}, N=${n}: the harness printed no result line` }))
        : Effect.try({
          try: () => JSON.parse(line) as HarnessResult,
          catch: () => new PeerError({ message: `${peer.label}, N=${n}: its result line is not JSON: ${line}` })
        })
    )
  )

const runSync = (peer: Peer, n: number): string | undefined => {
  const data = join(home, "data", `${peer.key}-${n}`)
  rmSync(data, { recursive: true, force: true })
  mkdirSync(data, { recursive: true })
  const { runs, warmup } = peer.runs(n)
  const [file, ...args] = peer.command(home)
  try {
    const out = execFileSync(
      file,
      [...args, "--n", String(n), "--runs", String(runs), "--warmup", String(warmup), "--dir", data, "--max-seconds", "150"],
      { cwd: home, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 16 * 1024 * 1024, timeout: 600_000 }
    )
    return out.trim().split("\n").filter((l) => l.startsWith("{")).at(-1)
  } finally {
    rmSync(data, { recursive: true, force: true })
  }
}

/** The installed versions of each peer's main package, for the record. */
export const versions = (): Record<string, string> => {
  const of = (dir: string, name: string) => {
    const path = join(home, dir, "node_modules", name, "package.json")
    try {
      return statSync(path).isFile() ? (JSON.parse(readFileSync(path, "utf8")) as { version: string }).version : "?"
    } catch {
      return "?"
    }
  }
  return {
    "@langchain/langgraph": of("langgraph", "@langchain/langgraph"),
    "@langchain/langgraph-checkpoint-sqlite": of("langgraph", "@langchain/langgraph-checkpoint-sqlite"),
    ai: of("aisdk", "ai"),
    "@openai/agents": of("openai-agents", "@openai/agents"),
    "reactive-agents": of("reactive-agents", "reactive-agents"),
    bun: of("reactive-agents", "bun")
  }
}
