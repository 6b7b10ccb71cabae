// `pnpm --filter @rx/cluster run bench:submission`: what submitting a goal to the cluster costs
// the submitting process, alone (no worker running, a fresh database of the Postgres at RX_PG_URL):
// 200 goals one after another, each split into recording its `GoalSubmitted` (`Runner.submit`: one
// Postgres transaction) and storing its `Drive` message (`Workers.drive`), with this process's CPU
// per goal; then 200 more, 8 at a time. After untimed submissions that warm the process up
// (`--warmup N`, default 20: a process's first goals also compile the code they run; a
// long-running submitter is past that). `--goals N` sets the 200. Prints two JSON lines.
import * as Reactivity from "@effect/experimental/Reactivity"
import { NodeRuntime } from "@effect/platform-node"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Runner, Tool, ToolRegistry } from "@rx/kernel"
import { Workers } from "@rx/cluster"
const adminUrl = process.env["RX_PG_URL"] ?? "postgres://rx:rx@127.0.0.1:5432/postgres"
const admin = (s) => Effect.scoped(Effect.flatMap(PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 }), (sql) => sql.unsafe(s))).pipe(Effect.provide(Reactivity.layer))
const name = `rx_probe_${Date.now().toString(36)}`
const database = new URL(adminUrl)
database.pathname = `/${name}`
const url = database.toString()
// The workers' tool names, offered so the goals record them; this process runs none.
const offered = (n) => Tool.make({ name: n, description: n, input: Schema.Struct({ text: Schema.String }), output: Schema.Struct({ text: Schema.String }), idempotent: true, execute: () => Effect.dieMessage("the submitting process runs no tools") })
const tools = ToolRegistry.layer([offered("append"), offered("echo")])
const settings = { failoverMs: 15_000, refreshAssignmentsMs: 500, pollMs: 1000, shardsPerGroup: 30 }
const flag = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`)
  const value = at < 0 ? fallback : Number(process.argv[at + 1])
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, got ${process.argv[at + 1]}`)
  return value
}
const n = flag("goals", 200)
const warmup = flag("warmup", 20)
const prog = Effect.gen(function*() {
  for (let i = 0; i < warmup; i++) yield* Workers.submit({ goal: `w ${i}`, goalId: `w-${i}` })
  let tSubmit = 0, tDrive = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const a = performance.now()
    const id = yield* Runner.submit({ goal: `g ${i}`, goalId: `g-${i}` })
    const b = performance.now()
    yield* Workers.drive(id)
    tDrive += performance.now() - b
    tSubmit += b - a
  }
  const total = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  console.log(JSON.stringify({ warmup, per_goal_ms: Number((total / n).toFixed(2)), record_ms: Number((tSubmit / n).toFixed(2)), drive_ms: Number((tDrive / n).toFixed(2)), cpu_ms_per_goal: Number(((cpu.user + cpu.system) / 1000 / n).toFixed(2)) }))
  const t1 = performance.now()
  yield* Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => Workers.submit({ goal: `c ${i}`, goalId: `c-${i}` }), { concurrency: 8 })
  console.log(JSON.stringify({ eight_at_a_time_per_goal_ms: Number(((performance.now() - t1) / n).toFixed(2)) }))
}).pipe(Effect.provide(Layer.merge(Workers.layerClient({ url, ...settings }), tools)))
// Run by NodeRuntime.runMain: Ctrl-C or SIGTERM interrupts the run, and the database is dropped all the same.
NodeRuntime.runMain(Effect.acquireUseRelease(admin(`CREATE DATABASE ${name}`), () => prog, () => Effect.orDie(admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))))
