/**
 * Start-up as a person at a terminal feels it: the bundled `rx` (`packages/cli/dist/rx.mjs` and its
 * chunks, built with `pnpm --filter @rx/cli run bundle` when absent) run as a new process, beside
 * `node -e 0`. The bundle is measured from a copy beside it (`dist/.bench-<pid>/`, removed after),
 * taken while no build is writing it: a build during the measurement would change it mid-way.
 *
 * - `rx --version`, `rx list` and `rx inspect <id>` on a new log (the goals of the runs below):
 *   wall time from the spawn to the process's exit;
 * - `rx run` to its first model request: from the spawn until a fake Chat Completions server on
 *   127.0.0.1 (in this process) receives the request; it answers `done`, so the run ends at once.
 *
 * Each figure is the median of `runs` rounds after one that warms the file cache; a round runs
 * every command once, in turn, so drift hits them all. Beside them, the floor of any command on
 * Effect (`SnapshotFloor`): a process starting from a V8 startup snapshot of Effect's runtime,
 * and of the runtime with `Schema` and @effect/cli's `Command`. Each process gets a fresh HOME and XDG
 * folders of its own and none of the caller's `RX_*` or `NODE_*` variables. The folders are the
 * same for every command: rx's code cache (`$XDG_CACHE_HOME/rx`) is filled by the first ones,
 * so the figures are those of a person who runs rx often (from the second run). Beside them, in
 * the same rounds, `rx list` and `rx inspect` as a first run: each with an empty cache folder of
 * its own (V8 compiles everything, and the cache is made at exit).
 */
import { Effect, Schema } from "effect"
import { execFileSync, spawn } from "node:child_process"
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { join, resolve } from "node:path"
import * as SnapshotFloor from "./SnapshotFloor.js"
import * as TempDir from "./TempDir.js"
import { median } from "./Figures.js"

/** A command failed, or the bundle could not be built. */
export class StartupError extends Schema.TaggedError<StartupError>()("@rx/bench/StartupError", { message: Schema.String }) {}

const root = resolve(import.meta.dirname, "..", "..", "..", "..")
const dist = join(root, "packages", "cli", "dist")
export const bundle = join(dist, "rx.mjs")
const chunks = join(dist, "rx-chunks")

/** The bundle's files (names, sizes, times), to tell whether a build changed them; and the newest time. */
const listing = () => {
  const files = [bundle, ...(existsSync(chunks) ? readdirSync(chunks).map((name) => join(chunks, name)) : [])]
  let newest = 0
  const text = files.map((file) => {
    try {
      const { mtimeMs, size } = statSync(file)
      newest = Math.max(newest, mtimeMs)
      return `${file} ${size} ${mtimeMs}`
    } catch {
      return `${file} gone`
    }
  }).join("\n")
  return { text, newest }
}

/**
 * A copy of the bundle in `dist/.bench-<pid>/` (so that it resolves its external packages as the
 * bundle does), taken when the bundle has not changed for 3 s and did not change while copied;
 * removed with the scope.
 */
const snapshot = Effect.acquireRelease(
  Effect.gen(function*() {
    const copy = join(dist, `.bench-${process.pid}`)
    for (let attempt = 0; attempt < 60; attempt++) {
      const before = listing()
      if (Date.now() - before.newest > 3_000) {
        rmSync(copy, { recursive: true, force: true })
        const copied = yield* Effect.try(() => {
          cpSync(bundle, join(copy, "rx.mjs"))
          if (existsSync(chunks)) cpSync(chunks, join(copy, "rx-chunks"), { recursive: true })
        }).pipe(Effect.option)
        if (copied._tag === "Some" && listing().text === before.text) return copy
      }
      yield* Effect.sleep("2 seconds")
    }
    return yield* new StartupError({ message: `${bundle} kept changing (a build running?): no stable copy to measure in 2 minutes` })
  }),
  (copy) => Effect.sync(() => rmSync(copy, { recursive: true, force: true }))
)

/** Build the bundle if it is absent. */
const ensureBundle = (log: (line: string) => void): Effect.Effect<void, StartupError> =>
  existsSync(bundle)
    ? Effect.void
    : Effect.zipRight(
      Effect.sync(() => log("  building the CLI bundle (pnpm --filter @rx/cli run bundle)")),
      Effect.try({
        try: () => void execFileSync("pnpm", ["--filter", "@rx/cli", "run", "bundle"], { cwd: root, stdio: ["ignore", 2, 2] }),
        catch: (error) => new StartupError({ message: `building ${bundle} failed: ${error instanceof Error ? error.message : String(error)}` })
      })
    )

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  /** Milliseconds from the spawn to the exit. */
  readonly ms: number
  readonly started: number
}

/** Run a program to its end without blocking this process (the fake model server must answer). */
const exec = (file: string, args: ReadonlyArray<string>, options: { readonly env: NodeJS.ProcessEnv; readonly cwd: string }) =>
  Effect.async<Ran>((resume) => {
    const started = performance.now()
    const child = spawn(file, args, { env: options.env, cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr, ms: performance.now() - started, started })))
  })

/** A Chat Completions server answering every request with a call of `done`; notes when each request came. */
const fakeModel = Effect.acquireRelease(
  Effect.async<{ readonly server: Server; readonly baseUrl: string; readonly arrivals: Array<number> }>((resume) => {
    const arrivals: Array<number> = []
    const server = createServer((request, response) => {
      arrivals.push(performance.now())
      request.resume()
      request.on("end", () => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({
          id: "chatcmpl-bench",
          object: "chat.completion",
          created: 1_700_000_000,
          model: "fake",
          choices: [{
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_0", type: "function", function: { name: "done", arguments: JSON.stringify({ summary: "started" }) } }]
            },
            finish_reason: "tool_calls"
          }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
        }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed({ server, baseUrl: `http://127.0.0.1:${port}/v1`, arrivals }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
)

export interface Figures {
  /** Median milliseconds of each. */
  readonly node: number
  readonly version: number
  readonly list: number
  readonly inspect: number
  /** `rx list` and `rx inspect` with an empty code cache (a first run). */
  readonly listFirst: number
  readonly inspectFirst: number
  /** To the first model request. */
  readonly runFirstRequest: number
  /** To the end of that run (one iteration, `done`). */
  readonly run: number
  /** `node --snapshot-blob` of each `SnapshotFloor` entry: Effect in the heap, nothing compiled or run. */
  readonly effectSnapshot: number
  readonly effectCliSnapshot: number
  readonly runs: number
}


export const measure = (runs: number, log: (line: string) => void): Effect.Effect<Figures, StartupError> =>
  Effect.gen(function*() {
    yield* ensureBundle(log)
    const copy = yield* snapshot
    const box = yield* TempDir.make("rx-bench-startup-")
    const workspace = join(box, "workspace")
    for (const dir of [workspace, join(box, "home"), join(box, "state"), join(box, "config"), join(box, "cache")]) mkdirSync(dir)
    const db = join(box, "rx.db")
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("RX_") && !key.startsWith("NODE_"))),
      HOME: join(box, "home"),
      XDG_STATE_HOME: join(box, "state"),
      XDG_CONFIG_HOME: join(box, "config"),
      XDG_CACHE_HOME: join(box, "cache")
    }
    const model = yield* fakeModel
    const blobs = yield* Effect.tryPromise({
      try: () => SnapshotFloor.buildAll(box),
      catch: (error) => new StartupError({ message: `building the startup snapshots failed: ${error instanceof Error ? error.message : String(error)}` })
    })
    const rx = (...args: Array<string>) => exec(process.execPath, [join(copy, "rx.mjs"), ...args], { env, cwd: workspace })
    // A first run: a cache folder no run has used (removed with the box).
    let fresh = 0
    const rxFirst = (...args: Array<string>) =>
      Effect.suspend(() => {
        const cache = join(box, `first-cache-${fresh++}`)
        mkdirSync(cache)
        return exec(process.execPath, [join(copy, "rx.mjs"), ...args], { env: { ...env, XDG_CACHE_HOME: cache }, cwd: workspace })
      })
    const checked = (what: string, ran: Ran) =>
      ran.code === 0 ? Effect.succeed(ran) : Effect.fail(new StartupError({ message: `${what} exited ${ran.code}: ${ran.stderr.trim().slice(0, 500)}` }))
    const runGoal = Effect.gen(function*() {
      const before = model.arrivals.length
      const ran = yield* checked("rx run", yield* rx("run", "--db", db, "--base-url", model.baseUrl, "--model", "fake", "benchmark start-up"))
      const first = model.arrivals[before]
      if (first === undefined) return yield* new StartupError({ message: "rx run ended without asking the model" })
      return { toFirst: first - ran.started, whole: ran.ms }
    })
    // The first run creates the log; its goal is the one inspected.
    yield* runGoal
    const listed = yield* checked("rx list", yield* rx("list", "--db", db, "--json"))
    const goalId = /"goalId":\s*"([^"]+)"/.exec(listed.stdout)?.[1]
    if (goalId === undefined) return yield* new StartupError({ message: `rx list --json named no goal: ${listed.stdout.slice(0, 300)}` })
    const samples = {
      node: [] as Array<number>,
      version: [] as Array<number>,
      list: [] as Array<number>,
      inspect: [] as Array<number>,
      listFirst: [] as Array<number>,
      inspectFirst: [] as Array<number>,
      toFirst: [] as Array<number>,
      run: [] as Array<number>,
      effect: [] as Array<number>,
      effectCli: [] as Array<number>
    }
    const node = (what: string, ...args: Array<string>) => Effect.flatMap(exec(process.execPath, args, { env, cwd: workspace }), (ran) => checked(what, ran))
    for (let r = 0; r <= runs; r++) {
      const plain = yield* node("node -e 0", "-e", "0")
      const effect = yield* node("the Effect snapshot", "--snapshot-blob", blobs.effect)
      const effectCli = yield* node("the Effect and @effect/cli snapshot", "--snapshot-blob", blobs.effect_cli)
      const version = yield* checked("rx --version", yield* rx("--version"))
      const list = yield* checked("rx list", yield* rx("list", "--db", db))
      const inspect = yield* checked("rx inspect", yield* rx("inspect", "--db", db, goalId))
      const listFirst = yield* checked("rx list (first run)", yield* rxFirst("list", "--db", db))
      const inspectFirst = yield* checked("rx inspect (first run)", yield* rxFirst("inspect", "--db", db, goalId))
      const run = yield* runGoal
      if (r === 0) continue
      samples.node.push(plain.ms)
      samples.effect.push(effect.ms)
      samples.effectCli.push(effectCli.ms)
      samples.version.push(version.ms)
      samples.list.push(list.ms)
      samples.inspect.push(inspect.ms)
      samples.listFirst.push(listFirst.ms)
      samples.inspectFirst.push(inspectFirst.ms)
      samples.toFirst.push(run.toFirst)
      samples.run.push(run.whole)
    }
    return {
      node: median(samples.node),
      version: median(samples.version),
      list: median(samples.list),
      inspect: median(samples.inspect),
      listFirst: median(samples.listFirst),
      inspectFirst: median(samples.inspectFirst),
      runFirstRequest: median(samples.toFirst),
      run: median(samples.run),
      effectSnapshot: median(samples.effect),
      effectCliSnapshot: median(samples.effectCli),
      runs
    }
  }).pipe(Effect.scoped)
