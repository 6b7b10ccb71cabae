// `pnpm --filter @rx/cluster run bench`: goals per second and iterations per second with 1, 2 and 3
// workers: real processes (test/fixtures/worker.mjs: a scripted instant model, five iterations a
// goal, tools that return at once) on a fresh database of the Postgres at RX_PG_URL (default: the
// tests' server), RX_BENCH_GOALS goals (120) submitted from this process one after another
// (`--submit N`: N at a time; 32 with a quota). A benchmark, not a test: it prints one JSON line
// per worker count. Build first (`pnpm build`).
//
// `-- --quota 0.1`: each worker held to that share of one core by Linux's cpu controller (a cgroup
// v1 group of its own under /sys/fs/cgroup/cpu, `cpu.cfs_quota_us`; root only), with 1, 2, 4 and
// 8 workers (`--workers 1,2,4,8`) and RX_BENCH_GOALS 480: what the workers do scales only if the
// figures grow with their count while Postgres and this process have cores to spare (on 2 cores,
// 8 workers at 0.2 leave Postgres too little; 0.1 does not). Each line
// says how long the quota held a worker back (`throttled_seconds`), and a last line each count's
// goals per second over one worker's.
//
// `--shards N`: the cluster's shards (300, rx's default). A goal goes to the worker holding the shard
// its id hashes to, not to the least busy, so each line also says how many goals each worker ran
// (`goals_by_worker`): the busiest one sets the end.
//
// `--rounds N`: the worker counts N times over, in turn; the last line then gives the median of
// each count's goals per second, over one worker's median (one run varies by 10-20% here).
//
// Every run checks the ledger the workers' `append` tool writes: each goal's two calls, once each.
import * as Reactivity from "@effect/experimental/Reactivity"
import { NodeRuntime } from "@effect/platform-node"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Console, Effect, Layer, Redacted, Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Workers } from "@rx/cluster"

const adminUrl = process.env["RX_PG_URL"] ?? "postgres://rx:rx@127.0.0.1:5432/postgres"
const flag = (name) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? undefined : process.argv[at + 1]
}
const quota = flag("quota") === undefined ? undefined : Number(flag("quota"))
if (quota !== undefined && !(quota > 0 && quota <= 4)) throw new Error(`--quota: a share of one core, above 0 and at most 4 (got ${flag("quota")})`)
const counts = (flag("workers") ?? (quota === undefined ? "1,2,3" : "1,2,4,8")).split(",").map(Number)
if (counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--workers: worker counts such as 1,2,4,8 (got ${flag("workers")})`)
const rounds = Number(flag("rounds") ?? "1")
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds: a whole number of rounds, at least 1 (got ${flag("rounds")})`)
// Goals submitted at once: with a quota, enough that this one process keeps every worker busy (8 at
// a time took 4 of 8 workers' 11 seconds: they ran their goals as fast as the goals came).
const submitting = Number(flag("submit") ?? (quota === undefined ? "1" : "32"))
if (!Number.isInteger(submitting) || submitting < 1) throw new Error(`--submit: goals submitted at once, at least 1 (got ${flag("submit")})`)
// With a quota, 480 goals: a goal runs where its id's shard is, so with 240 the busiest of 8 workers
// held 36-48 goals (a mean of 30), which alone capped 8 workers at 5.0-6.7x one; with 480, 71-76 of 60.
const goals = Number(process.env["RX_BENCH_GOALS"] ?? (quota === undefined ? "120" : "480"))
const worker = fileURLToPath(new URL("../test/fixtures/worker.mjs", import.meta.url))
// The shards a goal is placed by (hashed from its id) and the workers share: 300, as rx's default, unless `--shards N`.
const shardsPerGroup = Number(flag("shards") ?? "300")
if (!Number.isInteger(shardsPerGroup) || shardsPerGroup < 1) throw new Error(`--shards: a whole number of shards, at least 1 (got ${flag("shards")})`)
const settings = { failoverMs: 15_000, refreshAssignmentsMs: 500, pollMs: 1000, shardsPerGroup }

const admin = (statement) =>
  Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 }), (sql) => sql.unsafe(statement))).pipe(
    Effect.provide(Reactivity.layer)
  )

/** A fresh database, dropped with the scope. */
const database = Effect.acquireRelease(
  Effect.map(Effect.sync(() => `rx_bench_${Date.now().toString(36)}`), (name) => name).pipe(Effect.tap((name) => admin(`CREATE DATABASE ${name}`))),
  (name) => Effect.ignore(admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
)

const freePort = Effect.async((resume) => {
  const server = net.createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address()
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The cpu controller's folder (cgroup v1) for this run's groups. */
const cpuRoot = path.join("/sys/fs/cgroup/cpu", `rx-bench-${process.pid}`)

/**
 * A cgroup holding its processes to `share` of one core (`cpu.cfs_quota_us` over a 100 ms period),
 * removed with the scope (after the worker in it is killed, as scopes close in reverse).
 */
const cpuGroup = (name, share) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const dir = path.join(cpuRoot, name)
        fs.mkdirSync(dir, { recursive: true })
        fs.writeFileSync(path.join(dir, "cpu.cfs_period_us"), "100000")
        fs.writeFileSync(path.join(dir, "cpu.cfs_quota_us"), String(Math.round(share * 100_000)))
        return dir
      },
      catch: (error) => new Error(`--quota needs Linux's cpu controller (cgroup v1) at /sys/fs/cgroup/cpu, writable (root): ${error}`)
    }),
    (dir) => Effect.sync(() => {
      // The killed worker leaves the group a moment later: try a few times.
      for (let i = 0; i < 50; i++) {
        try {
          fs.rmdirSync(dir)
          break
        } catch {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
        }
      }
      try {
        fs.rmdirSync(cpuRoot)
      } catch {
        // Another worker's group is still there; the last one removes the folder.
      }
    })
  )

/** How long the quota held the group's processes back, in seconds (`cpu.stat`'s throttled_time, ns). */
const throttled = (dir) => Number(/throttled_time (\d+)/.exec(fs.readFileSync(path.join(dir, "cpu.stat"), "utf8"))?.[1] ?? "0") / 1e9

/** A worker process, up (it printed READY), in the cgroup `group` if given (from its first instruction on); killed with the scope. */
const startWorker = (args, group) =>
  Effect.acquireRelease(
    Effect.async((resume) => {
      const child = spawn(process.execPath, [worker, ...args], {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, RX_TEST_SHARDS_PER_GROUP: String(shardsPerGroup) }
      })
      if (group !== undefined) fs.writeFileSync(path.join(group, "cgroup.procs"), String(child.pid))
      let output = ""
      // Held to a share of a core, a worker takes that much longer to load.
      const timer = setTimeout(() => resume(Effect.dieMessage(`a worker did not start:\n${output}`)), group === undefined ? 30_000 : 300_000)
      child.stdout.setEncoding("utf8").on("data", (chunk) => {
        output += chunk
        if (output.includes("READY")) {
          clearTimeout(timer)
          resume(Effect.succeed(child))
        }
      })
      child.stderr.setEncoding("utf8").on("data", (chunk) => (output += chunk))
    }),
    (child) => Effect.async((resume) => {
      if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.kill("SIGKILL")
    })
  )

/** A process's CPU seconds so far (user + system, from /proc). */
const cpuOf = (pid) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** The machine's busy and total CPU seconds so far, all cores (from /proc/stat). */
const machine = () => {
  const [, ...ticks] = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number)
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0)
  const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0)
  return { busy: (total - idle) / 100, total: total / 100 }
}

/** The ledger's lines, each `<callId> <worker>`. */
const ledgerLines = (ledger) =>
  fs.existsSync(ledger) ? fs.readFileSync(ledger, "utf8").trim().split("\n").filter((line) => line !== "").map((line) => line.split(" ")) : []

/** How many of the goals `ids` each worker ran (its name is on each of its ledger lines), most first. */
const goalsByWorker = (lines, ids) => {
  const wanted = new Set(ids.map((id) => `${id}:1`))
  const counts = new Map()
  for (const [call, name] of lines) {
    if (wanted.has(call)) counts.set(name, (counts.get(name) ?? 0) + 1)
  }
  return [...counts.values()].sort((a, b) => b - a)
}

/** Each goal's `append` calls (steps 1 and 3) in the ledger once each, and nothing else: nothing lost, nothing run twice. */
const checkLedger = (lines, ids) => {
  const calls = lines.map(([call]) => call)
  const expected = ids.flatMap((id) => [`${id}:1`, `${id}:3`]).sort()
  const seen = [...calls].sort()
  if (JSON.stringify(seen) !== JSON.stringify(expected)) {
    const twice = calls.filter((c, i) => calls.indexOf(c) !== i)
    const missing = expected.filter((c) => !calls.includes(c))
    throw new Error(`the ledger is wrong: ${calls.length} calls for ${expected.length} expected; run twice: ${twice.slice(0, 5).join(", ") || "none"}; missing: ${missing.slice(0, 5).join(", ") || "none"}`)
  }
  return "each call once"
}

// The submitting process offers the workers' tool names, so the goals record them; it runs none.
const offered = (name) =>
  Tool.make({
    name,
    description: name,
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ text: Schema.String }),
    idempotent: name === "echo",
    execute: () => Effect.dieMessage("the benchmark process runs no tools")
  })
const tools = ToolRegistry.layer([offered("append"), offered("echo")])

const measure = (count) =>
  Effect.scoped(Effect.gen(function*() {
    const name = yield* database
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    const ledger = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "rx-bench-")), "ledger")
    const groups = []
    const pids = []
    for (let i = 1; i <= count; i++) {
      const port = yield* freePort
      const group = quota === undefined ? undefined : yield* cpuGroup(`w${i}`, quota)
      if (group !== undefined) groups.push(group)
      pids.push((yield* startWorker([`w${i}`, url.toString(), String(port), String(settings.failoverMs), ledger, "0"], group)).pid)
    }
    // Every worker takes its shards before the first goal: the runners see each other within a
    // refresh of their assignments (500 ms); a quota slows that down.
    if (quota !== undefined) yield* Effect.sleep("5 seconds")
    return yield* Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const submitAll = (prefix, n) =>
        Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) =>
          Workers.submit({ goal: `${prefix} ${i}`, goalId: `${prefix}-${i}`, options: { maxIterations: 20 } }), { concurrency: submitting })
      /** The summaries once all `n` goals of the database have ended: one query a poll, so watching costs next to nothing. */
      const allEnded = (n) =>
        Effect.gen(function*() {
          while (true) {
            const summaries = yield* store.goals()
            if (summaries.length === n && summaries.every((s) => s.status === "terminated")) return summaries
            yield* Effect.sleep("100 millis")
          }
        })
      // With a quota, 8 goals a worker first, so each has loaded and warmed up the code a goal runs
      // (about a second of CPU, five at 0.2 of a core) before the clock starts.
      const warm = quota === undefined ? [] : yield* submitAll("warm", 8 * count)
      if (warm.length > 0) yield* allEnded(warm.length)
      const throttledBefore = groups.map(throttled)
      const workersBefore = pids.map(cpuOf)
      const machineBefore = machine()
      const selfBefore = process.cpuUsage()
      const started = performance.now()
      const ids = yield* submitAll("bench", goals)
      const submitted = (performance.now() - started) / 1000
      const summaries = (yield* allEnded(warm.length + goals)).filter((s) => s.goalId.startsWith("bench-"))
      const seconds = (performance.now() - started) / 1000
      const iterations = summaries.reduce((n, s) => n + s.iterations, 0)
      const self = process.cpuUsage(selfBefore)
      const submitter = (self.user + self.system) / 1e6
      const workersCpu = pids.reduce((n, pid, i) => n + cpuOf(pid) - (workersBefore[i] ?? 0), 0)
      const now = machine()
      const busy = now.busy - machineBefore.busy
      const lines = ledgerLines(ledger)
      return {
        workers: count,
        goals,
        iterations,
        seconds: Number(seconds.toFixed(2)),
        submitting_seconds: Number(submitted.toFixed(2)),
        goals_per_second: Number((goals / seconds).toFixed(1)),
        iterations_per_second: Number((iterations / seconds).toFixed(1)),
        // Where the machine's CPU went meanwhile: the workers, this process (submitting and
        // polling), and the rest (Postgres, and whatever else runs here).
        cpu_seconds: {
          workers: Number(workersCpu.toFixed(2)),
          submitter: Number(submitter.toFixed(2)),
          rest: Number((busy - workersCpu - submitter).toFixed(2)),
          machine_busy_fraction: Number((busy / (now.total - machineBefore.total)).toFixed(2))
        },
        ...(quota === undefined ? {} : {
          quota,
          throttled_seconds: Number(groups.reduce((n, g, i) => n + throttled(g) - (throttledBefore[i] ?? 0), 0).toFixed(2))
        }),
        ledger: checkLedger(lines, [...warm, ...ids]),
        shards_per_group: shardsPerGroup,
        goals_by_worker: goalsByWorker(lines, ids)
      }
    }).pipe(Effect.provide(Layer.merge(Workers.layerClient({ url: url.toString(), ...settings }), tools)))
  }))

// Run by NodeRuntime.runMain: Ctrl-C or SIGTERM interrupts the run, so its scopes close: each
// worker is killed, its cgroup removed and the database dropped, none left behind.
NodeRuntime.runMain(Effect.gen(function*() {
  const results = []
  for (let round = 0; round < rounds; round++) {
    for (const count of counts) {
      const result = yield* measure(count)
      results.push(result)
      yield* Console.log(JSON.stringify(rounds === 1 ? result : { round: round + 1, ...result }))
    }
  }
  // Each count's median goals per second over its rounds, over one worker's.
  const median = (count) => {
    const sorted = results.filter((r) => r.workers === count).map((r) => r.goals_per_second).sort((a, b) => a - b)
    return sorted.length % 2 === 1 ? sorted[(sorted.length - 1) / 2] : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2
  }
  if (counts.includes(1) && counts.length > 1) {
    yield* Console.log(JSON.stringify({
      ...(rounds === 1 ? {} : { rounds, median_goals_per_second: Object.fromEntries(counts.map((n) => [n, median(n)])) }),
      goals_per_second_over_one_worker: Object.fromEntries(counts.map((n) => [n, Number((median(n) / median(1)).toFixed(2))]))
    }))
  }
}))
