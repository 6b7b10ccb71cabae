/**
 * `pnpm bench [--json] [--peers] [--server-profile DIR] [--server-script PATH]`: the figures of DESIGN.md section 8,
 * each beside its floor measured in the same run, those of rx serve and the CLI's start-up; with
 * `--peers`, the peers on the same loop beside rx. A table by default; `--json` prints one JSON
 * object. `--server-profile DIR` runs the served path's server process under `node --cpu-prof`;
 * `--server-script PATH` serves from another build's `ServeChild.js` (before/after pairs).
 */
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Goal, LanguageModel, Runner, State, StateStore, ToolRegistry } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import * as Floors from "./Floors.js"
import * as Peers from "./Peers.js"
import { compaction, echo, memoryRun, sqliteConcurrent, sqliteRun, untilThenStop } from "./Scenario.js"
import * as Serve from "./Serve.js"
import * as Startup from "./Startup.js"
import { flagValue, median, round } from "./Figures.js"

const json = process.argv.includes("--json")
const withPeers = process.argv.includes("--peers")
const serverProfile = flagValue("--server-profile")
const serverScript = flagValue("--server-script")
const log = (line: string) => {
  if (!json) process.stderr.write(`${line}\n`)
}
const dir = mkdtempSync(join(tmpdir(), "rx-bench-"))
const fileSize = (path: string) => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}
/** The database and its WAL and shared-memory files, after the store closed (WAL checkpointed). */
const diskBytes = (db: string) => fileSize(db) + fileSize(`${db}-wal`) + fileSize(`${db}-shm`)

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)

// Warm up the JIT: the per-run paths (layers, submit, resume, the cancel watcher) as well as
// the loop, as in a process that has run goals before; otherwise the first samples, and every
// N=100 one, measure V8 compiling them.
log("warming up")
for (let r = 0; r < 30; r++) await run(memoryRun(100))
await run(memoryRun(2_000))

log("kernel, memory store")
const kernel: Record<string, number> = {}
for (const n of [100, 1_000, 10_000]) {
  const repeats = n === 10_000 ? 3 : n === 1_000 ? 7 : 21
  const samples: Array<number> = []
  for (let r = 0; r < repeats; r++) samples.push(await run(memoryRun(n)))
  kernel[n] = round(median(samples), 2)
  log(`  N=${n}: ${kernel[n]} us/iteration`)
}

log("compaction, memory store")
const compacting = await run(compaction(15))
const compactionFigures = {
  untriggered_us_per_iteration_30: { off: round(compacting.small.off, 2), on: round(compacting.small.on, 2) },
  us_per_iteration_1000: { off: round(compacting.large.off, 2), on: round(compacting.large.on, 2) },
  summaries_1000: compacting.summaries,
  summary_us: round(((compacting.large.on - compacting.large.off) * 1_000) / Math.max(1, compacting.summaries), 1)
}
log(`  N=30 (no summary): off ${compactionFigures.untriggered_us_per_iteration_30.off}, on ${compactionFigures.untriggered_us_per_iteration_30.on} us/iteration; N=1000: ${compactionFigures.summaries_1000} summaries, ${compactionFigures.summary_us} us each`)

log("SQLite, N=1000, each NORMAL sample beside a sample of its floor")
// Two runs to warm the store's paths up; the first also gives an iteration's four events as the
// store recorded them (its second iteration), which the floor commits.
await run(sqliteRun(join(dir, "s-warm-0.db"), 1_000, "NORMAL"))
await run(sqliteRun(join(dir, "s-warm-1.db"), 1_000, "NORMAL"))
const iterationEvents = await run(Effect.flatMap(StateStore.StateStore, (store) => store.load("sql-1000", 5)).pipe(
  Effect.map((events) => events.slice(0, 4)),
  Effect.provide(SqliteStore.layer({ filename: join(dir, "s-warm-0.db") }))
))
/** The floor: raw better-sqlite3 making the store's commits on a log the store created. */
const storeFloor = async (file: string) => {
  await run(sqliteRun(file, 1, "NORMAL"))
  return Floors.sqliteStoreCommits(file, "NORMAL", 1_000, iterationEvents)
}
const normalSamples: Array<number> = []
const floorSamples: Array<number> = []
for (let r = 0; r < 5; r++) {
  normalSamples.push(await run(sqliteRun(join(dir, `s-NORMAL-${r}.db`), 1_000, "NORMAL")))
  floorSamples.push(await storeFloor(join(dir, `floor-store-NORMAL-${r}.db`)))
}
const sqliteNormal = round(median(normalSamples), 1)
const sqliteFloorEffect = round(median(floorSamples), 1)
const fullSamples: Array<number> = []
for (let r = 0; r < 3; r++) fullSamples.push(await run(sqliteRun(join(dir, `s-FULL-${r}.db`), 1_000, "FULL")))
const sqliteFull = round(median(fullSamples), 1)
log(`  NORMAL ${sqliteNormal} us/iteration (floor ${sqliteFloorEffect}), FULL ${sqliteFull} us/iteration`)

log("SQLite, 400 goals of 20 iterations at once on one file (NORMAL)")
// One warm-up round, then the median of 3, each on a new file.
await run(sqliteConcurrent(join(dir, "c-warm.db"), 400, 20))
const concurrentSamples: Array<number> = []
for (let r = 0; r < 3; r++) concurrentSamples.push(await run(sqliteConcurrent(join(dir, `c-${r}.db`), 400, 20)))
const sqliteConcurrentCpu = round(median(concurrentSamples), 1)
log(`  ${sqliteConcurrentCpu} us of CPU per iteration`)

log("disk per iteration")
const disk: Record<string, number> = {}
for (const n of [100, 1_000, 10_000]) {
  const db = join(dir, `disk-${n}.db`)
  await run(sqliteRun(db, n, "NORMAL"))
  disk[n] = round(diskBytes(db) / n, 0)
  log(`  N=${n}: ${disk[n]} bytes/iteration`)
}

log("peak RSS, N=10000 (child process)")
const rssOut = execFileSync(process.execPath, [join(import.meta.dirname, "rss.js"), "10000"], { encoding: "utf8" })
const peakRss = round((JSON.parse(rssOut.trim().split("\n").at(-1) ?? "{}") as { peakRssMb: number }).peakRssMb, 1)
log(`  ${peakRss} MB`)

log("replay from SQLite: decode + fold")
const replayDb = join(dir, "disk-10000.db")
const replayRate = await run(Effect.gen(function*() {
  const store = yield* StateStore.StateStore
  const rates: Array<number> = []
  for (let r = 0; r < 5; r++) {
    const started = performance.now()
    const events = yield* store.load("sql-10000")
    State.fromEvents("sql-10000", events)
    rates.push(events.length / ((performance.now() - started) / 1000))
  }
  return median(rates)
}).pipe(Effect.provide(SqliteStore.layer({ filename: replayDb }))))
log(`  ${Math.round(replayRate)} events/s`)

log("resume of a 100,000-event goal (snapshots in use)")
const resumeDb = join(dir, "resume.db")
// 25,000 iterations of 4 events each; the model then stops the process's run (as a crash
// would), leaving the goal open.
await run(Runner.run({ goal: "benchmark", goalId: "big", options: { maxIterations: 100_000, noProgressWindow: 100_000 } }).pipe(
  Effect.provide(Layer.merge(ToolRegistry.layer([echo]), untilThenStop(25_000))),
  Effect.provide(SqliteStore.layer({ filename: resumeDb, synchronous: "NORMAL" })),
  Effect.exit
))
// Resume: from the call until the model is asked again (restore, recover, build the prompt).
const resume = await run(Effect.gen(function*() {
  const started = performance.now()
  let asked = Number.NaN
  const model = Layer.succeed(LanguageModel.LanguageModel, {
    generate: () => Effect.suspend(() => {
      asked = performance.now()
      return Effect.interrupt
    })
  })
  yield* Runner.resume("big").pipe(Effect.provide(Layer.merge(ToolRegistry.layer([echo]), model)), Effect.exit)
  const state = yield* Goal.restore("big")
  return { ms: asked - started, events: state.seq }
}).pipe(Effect.provide(SqliteStore.layer({ filename: resumeDb }))))
log(`  ${round(resume.ms)} ms for ${resume.events} events`)

log("rx serve (HTTP): 100 goals of 10 iterations at once, memory store, the server in a process of its own; the same in-process")
const served = await run(Serve.measure({
  goals: 100,
  iterations: 10,
  rounds: 5,
  // The server process warmed up as the in-process rounds are (its figure settles after about ten rounds).
  warmRounds: 10,
  sse: { goals: 1, iterations: 100, delayMs: 2 },
  profileDir: serverProfile,
  serverScript
}))
const serve = {
  goalsPerSecond: round(served.goalsPerSecond, 1),
  http: round(served.serverUsPerIteration, 1),
  serverCpu: round(served.serverCpuUsPerIteration, 1),
  clientCpu: round(served.clientCpuUsPerIteration, 1),
  sameProcess: round(served.sameProcessUsPerIteration, 1),
  inProcess: round(served.inProcessUsPerIteration, 1),
  inProcessCpu: round(served.inProcessCpuUsPerIteration, 1),
  overhead: round(served.serverUsPerIteration - served.inProcessUsPerIteration, 1),
  sse: { p50: round(served.sse.p50, 2), p99: round(served.sse.p99, 2) }
}
log(`  ${serve.goalsPerSecond} goals/s; ${serve.http} us/iteration seen by the clients (server CPU ${serve.serverCpu}, clients' CPU ${serve.clientCpu}), ${serve.inProcess} in-process; server in the clients' process: ${serve.sameProcess}`)
log(`  SSE, commit to client: p50 ${serve.sse.p50} ms, p99 ${serve.sse.p99} ms (${served.sse.events} events)`)
if (serverProfile !== undefined) log(`  the server's CPU profile is in ${serverProfile}`)

log("rx serve, step overhead: 50 goals of 20 iterations at once, from a call's end to its goal's next call's start")
const stepOverhead = await run(Serve.stepOverheads((key, o) => log(`  ${key}: p50 ${o.p50} ms, p75 ${o.p75} ms, p95 ${o.p95} ms, p99 ${o.p99} ms (${o.steps} steps)`)))

log("start-up of the bundled CLI (new processes, median of 10)")
const started = await run(Startup.measure(10, log))
const startup = {
  node: round(started.node),
  version: round(started.version),
  list: round(started.list),
  inspect: round(started.inspect),
  list_first: round(started.listFirst),
  inspect_first: round(started.inspectFirst),
  run_first_request: round(started.runFirstRequest),
  run: round(started.run),
  effect_snapshot: round(started.effectSnapshot),
  effect_cli_snapshot: round(started.effectCliSnapshot)
}
// Each over `node -e 0` of the same rounds: the target means the same on any machine.
const startupRatios = {
  list: round(started.list / started.node, 2),
  inspect: round(started.inspect / started.node, 2),
  list_first: round(started.listFirst / started.node, 2),
  inspect_first: round(started.inspectFirst / started.node, 2)
}
log(`  node -e 0 ${startup.node} ms; rx --version ${startup.version}, list ${startup.list}, inspect ${startup.inspect}, run to its first model request ${startup.run_first_request} ms`)
log(`  first run (empty code cache): list ${startup.list_first}, inspect ${startup.inspect_first} ms`)
log(`  floor of a command on Effect (startup snapshots): Effect ${startup.effect_snapshot} ms, Effect + Schema + @effect/cli ${startup.effect_cli_snapshot} ms`)

log("floors")
const floors = {
  sqlite_commit_normal_us: round(median([0, 1, 2].map((r) => Floors.sqliteCommit(join(dir, `floor-n-${r}.db`), "NORMAL", 2_000))), 1),
  sqlite_commit_full_us: round(median([0, 1, 2].map((r) => Floors.sqliteCommit(join(dir, `floor-f-${r}.db`), "FULL", 500))), 1),
  effect_loop_us_per_iteration: round(median([0, 1, 2, 3, 4].map(() => Floors.effectLoop(10_000))), 2)
}
/** The kernel's figure over the Effect loop it is made of (same run): a target that means the same on any machine. */
const kernelOverEffectLoop = round((kernel[1000] ?? Number.NaN) / floors.effect_loop_us_per_iteration, 2)

/** The peers beside rx (`--peers`): rx's figures at N = 100 and 1,000 and each peer's, each peer over its rx reference. */
const peers = withPeers ? await run(Effect.gen(function*() {
  log("peers: installing where missing")
  yield* Peers.install(log)
  log("rx at N=100 on SQLite (N=1000 above)")
  const at100 = (synchronous: "FULL" | "NORMAL", repeats: number) =>
    Effect.gen(function*() {
      const samples: Array<number> = []
      for (let r = 0; r < repeats; r++) samples.push(yield* sqliteRun(join(dir, `p-${synchronous}-${r}.db`), 100, synchronous))
      return round(median(samples), 1)
    })
  const rx = {
    memory: { "100": kernel[100] ?? Number.NaN, "1000": kernel[1000] ?? Number.NaN },
    sqlite_normal: { "100": yield* at100("NORMAL", 9), "1000": sqliteNormal },
    sqlite_full: { "100": yield* at100("FULL", 5), "1000": sqliteFull }
  }
  const figures: Record<string, Record<string, Peers.HarnessResult>> = {}
  for (const peer of Peers.peers) {
    for (const n of [100, 1_000]) {
      log(`  ${peer.label}, N=${n}`)
      const result = yield* Peers.run(peer, n)
      figures[peer.key] = { ...figures[peer.key], [n]: result }
      log(`    ${result.us_per_iter_median} us/iteration (${result.runs_done} runs)`)
    }
  }
  const ratio = (x: number | undefined, y: number | undefined) => (x === undefined || y === undefined ? Number.NaN : round(x / y, 1))
  const byKey = Object.fromEntries(Peers.peers.map((peer) => {
    const at = figures[peer.key] ?? {}
    return [peer.key, {
      us_per_iteration: { "100": at[100]?.us_per_iter_median ?? Number.NaN, "1000": at[1000]?.us_per_iter_median ?? Number.NaN },
      peak_rss_mb: { "100": at[100]?.peak_rss_mb ?? Number.NaN, "1000": at[1000]?.peak_rss_mb ?? Number.NaN },
      ...(at[1000]?.bytes_per_iter === undefined ? {} : { bytes_per_iteration: { "100": at[100]?.bytes_per_iter ?? Number.NaN, "1000": at[1000].bytes_per_iter } }),
      runs: { "100": at[100]?.runs_done ?? 0, "1000": at[1000]?.runs_done ?? 0 }
    }]
  }))
  // Each peer over its rx reference of the same run: persisted peers over rx on SQLite, the rest over rx in memory.
  const ratios: Record<string, Record<string, number>> = {}
  for (const peer of Peers.peers) {
    const at = figures[peer.key] ?? {}
    const refs = peer.against === "sqlite" ? { sqlite_normal: rx.sqlite_normal, sqlite_full: rx.sqlite_full } : { memory: rx.memory }
    for (const [name, ref] of Object.entries(refs)) {
      ratios[`${peer.key}_over_rx_${name}`] = {
        "100": ratio(at[100]?.us_per_iter_median, ref["100"]),
        "1000": ratio(at[1000]?.us_per_iter_median, ref["1000"])
      }
    }
  }
  return { rx, byKey, ratios, versions: Peers.versions(), installed_in: Peers.home }
})) : undefined

const result = {
  kernel_memory_us_per_iteration: kernel,
  kernel_over_effect_loop: kernelOverEffectLoop,
  sqlite_normal_us_per_iteration: sqliteNormal,
  sqlite_full_us_per_iteration: sqliteFull,
  sqlite_400_goals_cpu_us_per_iteration: sqliteConcurrentCpu,
  sqlite_floor_effect_us_per_iteration: sqliteFloorEffect,
  disk_bytes_per_iteration: disk,
  peak_rss_mb_10000: peakRss,
  replay_events_per_second: Math.round(replayRate),
  compaction: compactionFigures,
  resume_ms_100000_events: round(resume.ms),
  server_goals_per_second: serve.goalsPerSecond,
  server_us_per_iteration: serve.http,
  inprocess_us_per_iteration: serve.inProcess,
  inprocess_cpu_us_per_iteration: serve.inProcessCpu,
  server_overhead_us_per_iteration: serve.overhead,
  server_cpu_us_per_iteration: serve.serverCpu,
  client_cpu_us_per_iteration: serve.clientCpu,
  server_same_process_us_per_iteration: serve.sameProcess,
  sse_latency_ms: serve.sse,
  served_step_overhead_ms: stepOverhead,
  startup_ms: startup,
  startup_over_node: startupRatios,
  node_version: process.version,
  floors,
  ...(peers === undefined ? {} : { peers: { rx: peers.rx, ...peers.byKey, ratios: peers.ratios, versions: peers.versions, installed_in: peers.installed_in } })
}
rmSync(dir, { recursive: true, force: true })

if (json) {
  console.log(JSON.stringify(result))
} else {
  const k = kernel
  const rows: ReadonlyArray<readonly [string, string, string]> = [
    ["kernel, memory store, N=100 / 1000 / 10000", `${k[100]} / ${k[1000]} / ${k[10000]} us/it`, `<= 20 us/it; floor ${floors.effect_loop_us_per_iteration} us/it (N=1000 at ${kernelOverEffectLoop}x the Effect loop)`],
    ["growth, N=10000 over N=100", `${round((k[10000] ?? 0) / (k[100] ?? 1), 2)}x`, "<= 1.3x"],
    ["SQLite NORMAL, N=1000", `${sqliteNormal} us/it`, `<= 2x floor: ${round(2 * sqliteFloorEffect)} us (the store's 2 commits, raw: ${sqliteFloorEffect} us; one bare commit ${floors.sqlite_commit_normal_us} us)`],
    ["SQLite, 400 goals x 20 it at once", `${sqliteConcurrentCpu} us CPU/it`, "(none; the cost of many goals on one log)"],
    ["SQLite FULL, N=1000", `${sqliteFull} us/it`, `<= 1.1x floor: ${round(2.2 * floors.sqlite_commit_full_us)} us (2 fsynced commits: ${round(2 * floors.sqlite_commit_full_us)} us)`],
    ["disk, N=100 / 1000 / 10000", `${disk[100]} / ${disk[1000]} / ${disk[10000]} B/it`, "<= 1000 B/it, flat"],
    ["peak RSS, N=10000", `${peakRss} MB`, "<= 150 MB"],
    ["compaction on / off, N=30 (no summary)", `${compactionFigures.untriggered_us_per_iteration_30.on} / ${compactionFigures.untriggered_us_per_iteration_30.off} us/it`, "the same: no cost until a summary is due"],
    ["one summary (kernel, instant model)", `${compactionFigures.summary_us} us`, `${compactionFigures.summaries_1000} summaries in N=1000 (every 16 iterations of small turns)`],
    ["replay from SQLite (decode + fold)", `${Math.round(replayRate)} events/s`, ">= 500000 events/s"],
    ["resume, 100,000 events", `${round(resume.ms)} ms`, "<= 100 ms"],
    ["rx serve, 100 goals x 10 it at once", `${serve.goalsPerSecond} goals/s, ${serve.http} us/it`, `<= 3x in-process: ${round(3 * serve.inProcess)} us/it (in-process ${serve.inProcess}; ${round(serve.http / serve.inProcess, 2)}x)`],
    ["rx serve: server / clients CPU", `${serve.serverCpu} / ${serve.clientCpu} us/it`, `server ${round(serve.serverCpu / serve.inProcess, 2)}x in-process (${round(serve.serverCpu / serve.inProcessCpu, 2)}x its CPU, ${serve.inProcessCpu} us/it); server in the clients' process: ${serve.sameProcess} us/it`],
    ["SSE, commit to client, p50 / p99", `${serve.sse.p50} / ${serve.sse.p99} ms`, "(none)"],
    ...Object.entries(stepOverhead).map(([key, o]): readonly [string, string, string] => [
      `rx serve step overhead, ${key}, p50 / p95`,
      `${o.p50} / ${o.p95} ms`,
      `50 goals at once (p75 ${o.p75} ms); see the README for Vercel Workflow's and Restate's`
    ]),
    ["rx --version / list / inspect", `${startup.version} / ${startup.list} / ${startup.inspect} ms`, `<= 2x node -e 0: ${round(2 * startup.node)} ms (node -e 0 ${startup.node} ms; list ${startupRatios.list}x, inspect ${startupRatios.inspect}x)`],
    ["rx list / inspect, first run", `${startup.list_first} / ${startup.inspect_first} ms`, `empty code cache: list ${startupRatios.list_first}x, inspect ${startupRatios.inspect_first}x node -e 0`],
    ["Effect alone / + Schema, @effect/cli", `${startup.effect_snapshot} / ${startup.effect_cli_snapshot} ms`, `the floor of any rx command, from a startup snapshot (${round(startup.effect_cli_snapshot / startup.node, 2)}x node -e 0)`],
    ["rx run to its first model request", `${startup.run_first_request} ms`, `node -e 0 ${startup.node} ms (${round(startup.run_first_request / startup.node, 2)}x)`]
  ]
  const w0 = Math.max(...rows.map((r) => r[0].length))
  const w1 = Math.max(...rows.map((r) => r[1].length))
  console.log(`${"figure".padEnd(w0)}  ${"measured".padEnd(w1)}  target`)
  for (const [a, b, c] of rows) console.log(`${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`)
  if (peers !== undefined) {
    console.log("")
    console.log("peers, same loop, same run (us/iteration, N=100 / N=1000; ratio = peer over rx)")
    const line = (label: string, us: { readonly "100": number; readonly "1000": number }, versus: string) =>
      console.log(`${label.padEnd(34)}  ${`${us[100]} / ${us[1000]}`.padEnd(22)}  ${versus}`)
    line("rx, memory store", peers.rx.memory, "")
    line("rx, SQLite NORMAL", peers.rx.sqlite_normal, "")
    line("rx, SQLite FULL", peers.rx.sqlite_full, `2 fsynced commits: ${round(2 * floors.sqlite_commit_full_us)} us (N=1000 at ${round(sqliteFull / (2 * floors.sqlite_commit_full_us), 2)}x)`)
    for (const peer of Peers.peers) {
      const figures = peers.byKey[peer.key]
      if (figures === undefined) continue
      const ratios = Object.entries(peers.ratios).filter(([key]) => key.startsWith(`${peer.key}_over_`))
        .map(([key, r]) => `${r[100]}x / ${r[1000]}x over rx ${key.slice(`${peer.key}_over_rx_`.length).replace("_", " ")}`)
      line(peer.label, figures.us_per_iteration, `${ratios.join("; ")}${peer.note === undefined ? "" : ` (${peer.note})`}`)
    }
    const headline = peers.ratios["langgraph_sqlite_over_rx_sqlite_normal"]?.[1000]
    console.log(`headline: LangGraph + SqliteSaver at N=1000 over rx on SQLite NORMAL: ${headline}x (target >= 100x)`)
  }
}
